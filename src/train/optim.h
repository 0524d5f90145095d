// Optimizer construction (SGD, Adam, AdamW) with weight decay kept off biases and norms.
#pragma once
#include <memory>

#include <torch/optim/optimizer.h>

#include "config/config.h"
#include "models/registry.h"

namespace gputrain {

// `fused`: the update in ATen's fused kernels (fused_optim.h), with the same state and records.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& c, Net& model, bool fused = false);

// Sets the learning rate of every parameter group.
void set_lr(torch::optim::Optimizer& optimizer, double lr);

}  // namespace gputrain
