// Optimizer construction (SGD, Adam, AdamW) with weight decay kept off biases and norms.
#pragma once
#include <memory>

#include <torch/optim/optimizer.h>

#include "config/config.h"
#include "models/registry.h"

namespace gputrain {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& c, Net& model);

// Sets the learning rate of every parameter group.
void set_lr(torch::optim::Optimizer& optimizer, double lr);

}  // namespace gputrain
