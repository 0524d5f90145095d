// Optimizer construction with two parameter groups: weights decay, biases and norm scales do not
// (decaying them only hurts accuracy; the usual timm/Lightning practice).
#include "train/optim.h"

#include <torch/optim.h>

#include "train/fused_optim.h"

namespace gputrain {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& c, Net& model, bool fused) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);

  auto groups = [&](auto options) {
    auto without = options;
    without.weight_decay(0.0);
    std::vector<torch::optim::OptimizerParamGroup> g;
    g.emplace_back(decay, std::make_unique<decltype(options)>(options));
    if (!no_decay.empty()) g.emplace_back(no_decay, std::make_unique<decltype(options)>(without));
    return g;
  };
  if (c.optimizer == "sgd") {
    auto o = torch::optim::SGDOptions(c.lr).momentum(c.momentum).nesterov(c.nesterov).weight_decay(c.weight_decay);
    if (fused) return std::make_unique<FusedSGD>(groups(o), o);
    return std::make_unique<torch::optim::SGD>(groups(o), o);
  }
  auto betas = std::make_tuple(c.beta1, c.beta2);
  if (c.optimizer == "adam") {
    auto o = torch::optim::AdamOptions(c.lr).betas(betas).weight_decay(c.weight_decay);
    if (fused) return std::make_unique<FusedAdam>(groups(o), o);
    return std::make_unique<torch::optim::Adam>(groups(o), o);
  }
  auto o = torch::optim::AdamWOptions(c.lr).betas(betas).weight_decay(c.weight_decay);
  if (fused) return std::make_unique<FusedAdamW>(groups(o), o);
  return std::make_unique<torch::optim::AdamW>(groups(o), o);
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& g : optimizer.param_groups()) g.options().set_lr(lr);
}

}  // namespace gputrain
