// Optimizer construction (SGD, Adam, AdamW) with weight decay kept off biases and norms.
#pragma once
#include <memory>

#include <torch/optim/optimizer.h>

#include "config/config.h"
#include "models/registry.h"
#include "train/fine_tune.h"

namespace gputrain {

// `fused`: the update in ATen's fused kernels (fused_optim.h), with the same state and records.
// `lr_scale` (fine-tuning) gives each parameter a share of the learning rate; the groups'
// shares go to `group_scales` (one per parameter group, for set_lr).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& c, Net& model, bool fused = false,
                                                        const LrScale& lr_scale = nullptr,
                                                        std::vector<double>* group_scales = nullptr);

// Sets the learning rate of every parameter group: `lr` times the group's share (all 1 when
// `group_scales` is empty).
void set_lr(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& group_scales = {});

}  // namespace gputrain
