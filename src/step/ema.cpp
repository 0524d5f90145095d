// --ema_decay: an exponential moving average of the weights, evaluated and checkpointed beside them.
#include "step/ema.h"

#include <stdexcept>
#include <map>
#include <string>

#include <ATen/ops/_foreach_lerp.h>

namespace gputrain {

Ema::Ema(torch::nn::Module& module, double decay) : decay_(decay) {
  torch::NoGradGuard no_grad;
  // named_parameters() lists the same tensors in the same order as parameters().
  for (const auto& p : module.named_parameters()) {
    names_.push_back(p.key());
    params_.push_back(p.value().detach().clone());
  }
  for (const auto& b : module.named_buffers()) {
    names_.push_back(b.key());
    buffers_.push_back(b.value().detach().clone());
  }
}

void Ema::update(torch::nn::Module& module, const torch::Tensor& skipped) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> weights, buffers;
  for (const auto& p : module.parameters()) weights.push_back(p.detach());
  for (const auto& b : module.buffers()) buffers.push_back(b.detach());
  if (!skipped.defined()) {
    at::_foreach_lerp_(params_, weights, 1.0 - decay_);  // one fused kernel over all tensors
    for (size_t i = 0; i < buffers.size(); ++i) buffers_[i].copy_(buffers[i]);
    return;
  }
  // The lerp weight (1 - decay) * (1 - skipped), a device scalar: zero where the step was skipped.
  if (params_.empty()) return;
  // (Pipeline stages hold tensors on several devices: each gets the weight on its own.)
  const auto weight = (1.0 - skipped.reshape({})) * (1.0 - decay_);
  std::vector<torch::Tensor> weights_on;
  for (const auto& p : params_) weights_on.push_back(weight.device() == p.device() ? weight : weight.to(p.device()));
  at::_foreach_lerp_(params_, weights, weights_on);
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers_[i].copy_(torch::where(skipped.reshape({}).to(buffers_[i].device()) > 0, buffers_[i], buffers[i]));
}

void Ema::swap(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& p : module.parameters()) {
    torch::Tensor mine = p.data();
    p.set_data(params_[i]);
    params_[i++] = mine;
  }
  i = 0;
  for (auto& b : module.buffers()) {
    torch::Tensor mine = b.data();
    b.set_data(buffers_[i]);
    buffers_[i++] = mine;
  }
}

std::vector<torch::Tensor> Ema::tensors() const {
  std::vector<torch::Tensor> all = params_;
  all.insert(all.end(), buffers_.begin(), buffers_.end());
  return all;
}

void Ema::load_state(const std::vector<std::pair<std::string, torch::Tensor>>& stored) {
  std::map<std::string, torch::Tensor> by_name(stored.begin(), stored.end());
  auto all = tensors();  // the same storage as params_ and buffers_: copy_ fills the average
  for (size_t i = 0; i < all.size(); ++i) {
    auto it = by_name.find(names_[i]);
    if (it == by_name.end()) throw std::runtime_error("its EMA holds no '" + names_[i] + "'");
    // copy_ would broadcast a stored tensor of another shape into ours: refuse it instead.
    if (it->second.sizes() != all[i].sizes()) throw std::runtime_error("its EMA '" + names_[i] + "' has the wrong shape");
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < all.size(); ++i) all[i].copy_(by_name.at(names_[i]));
}

}  // namespace gputrain
