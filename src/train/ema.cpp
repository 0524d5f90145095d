// --ema_decay: an exponential moving average of the weights, evaluated and checkpointed beside them.
#include "train/ema.h"

#include <stdexcept>
#include <string>

#include <ATen/ops/_foreach_lerp.h>

namespace gputrain {

Ema::Ema(torch::nn::Module& module, double decay) : decay_(decay) {
  torch::NoGradGuard no_grad;
  for (const auto& p : module.parameters()) params_.push_back(p.detach().clone());
  for (const auto& b : module.buffers()) buffers_.push_back(b.detach().clone());
}

void Ema::update(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> weights;
  for (const auto& p : module.parameters()) weights.push_back(p.detach());
  at::_foreach_lerp_(params_, weights, 1.0 - decay_);  // one fused kernel over all tensors
  size_t i = 0;
  for (const auto& b : module.buffers()) buffers_[i++].copy_(b);
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

void Ema::save(torch::serialize::OutputArchive& archive) const {
  for (size_t i = 0; i < params_.size(); ++i) archive.write("ema.p" + std::to_string(i), params_[i]);
  for (size_t i = 0; i < buffers_.size(); ++i) archive.write("ema.b" + std::to_string(i), buffers_[i]);
}

bool Ema::load(torch::serialize::InputArchive& archive) {
  torch::NoGradGuard no_grad;
  torch::Tensor t;
  if (!archive.try_read("ema.p0", t)) return false;
  // copy_ would broadcast a stored tensor of another shape into ours: refuse it instead.
  auto read_into = [&](const std::string& key, torch::Tensor& mine) {
    archive.read(key, t);
    if (t.sizes() != mine.sizes()) throw std::runtime_error("'" + key + "' has the wrong shape for this model");
    mine.copy_(t);
  };
  for (size_t i = 0; i < params_.size(); ++i) read_into("ema.p" + std::to_string(i), params_[i]);
  for (size_t i = 0; i < buffers_.size(); ++i) read_into("ema.b" + std::to_string(i), buffers_[i]);
  return true;
}

}  // namespace gputrain
