// Optimizer construction with two parameter groups: weights decay, biases and norm scales do not
// (decaying them only hurts accuracy; the usual timm/Lightning practice).
#include "train/optim.h"

#include <algorithm>

#include <torch/optim.h>

#include "train/fused_optim.h"

namespace gputrain {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& c, Net& model, bool fused,
                                                        const LrScale& lr_scale, std::vector<double>* group_scales) {
  // Groups by (learning-rate share, decays), in the order of their first parameter (without
  // shares: the decayed weights, then biases and norms, as checkpoints have them). Every
  // parameter is in a group, frozen ones too: they take no gradient, so the update passes them
  // over and keeps no state for them until they are unfrozen.
  struct Group {
    double scale;
    bool decay;
    std::vector<torch::Tensor> params;
  };
  std::vector<Group> found;
  for (const auto& p : model.named_parameters()) {
    const double scale = lr_scale ? lr_scale(p.key()) : 1.0;
    const bool decay = p.value().dim() >= 2;
    auto it = std::find_if(found.begin(), found.end(), [&](const Group& g) { return g.scale == scale && g.decay == decay; });
    if (it == found.end()) it = found.insert(found.end(), Group{scale, decay, {}});
    it->params.push_back(p.value());
  }
  if (group_scales) {
    group_scales->clear();
    for (const auto& g : found) group_scales->push_back(g.scale);
  }

  auto groups = [&](auto options) {
    std::vector<torch::optim::OptimizerParamGroup> g;
    for (const auto& f : found) {
      auto o = options;
      o.lr(options.lr() * f.scale);
      if (!f.decay) o.weight_decay(0.0);
      g.emplace_back(f.params, std::make_unique<decltype(options)>(o));
    }
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

void set_lr(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& group_scales) {
  auto& groups = optimizer.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(i < group_scales.size() ? lr * group_scales[i] : lr);
}

}  // namespace gputrain
