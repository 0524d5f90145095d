// RNG and tensor snapshots for measurements that must not change the run.
#include "train/keep_state.h"

#include <ATen/Context.h>

namespace gputrain {
namespace {

at::Generator generator(const torch::Device& d) { return at::globalContext().defaultGenerator(d); }

}  // namespace

RngState::RngState(const torch::Device& device) : device_(device) {
  cpu_ = generator(torch::kCPU).get_state();
  if (device_.is_cuda()) cuda_ = generator(device_).get_state();
}

void RngState::restore() const {
  generator(torch::kCPU).set_state(cpu_);
  if (cuda_.defined()) generator(device_).set_state(cuda_);
}

TensorSnapshot::TensorSnapshot(torch::nn::Module& module, bool with_parameters) {
  if (with_parameters)
    for (const auto& p : module.parameters()) live_.push_back(p);
  for (const auto& b : module.buffers()) live_.push_back(b);
  for (const auto& t : live_) saved_.push_back(t.detach().clone());
}

void TensorSnapshot::restore() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < live_.size(); ++i) live_[i].copy_(saved_[i]);
}

}  // namespace gputrain
