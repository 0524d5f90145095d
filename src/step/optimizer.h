// The step's optimizer: SGD, Adam or AdamW, updating in ATen's fused kernels or in torch::optim's,
// behind one interface, so that the step asks what it needs (is the update fused? take these
// device inputs) instead of casting to find out. Its state stays torch::optim's, per parameter
// and kept in parameter groups: what checkpoints write (train/optimizer_state.h) and what a
// sharded optimizer slices by group.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "models/registry.h"
#include "step/fine_tune.h"

namespace gputrain {

class FusedOptimizer;

enum class OptimizerKind { kSGD, kAdam, kAdamW };

// What make_optimizer builds (the run's --optimizer, --lr, --weight_decay, ... flags).
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double lr = 1e-3;
  double weight_decay = 0;
  double momentum = 0;  // SGD
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999;  // Adam, AdamW
  bool fused = false;                 // the update in ATen's fused kernels (step/fused_optim.h)
};

class Optimizer {
 public:
  // `fused`: `base` itself when its update is fused (make_optimizer knows which it built), else null.
  Optimizer(std::unique_ptr<torch::optim::Optimizer> base, FusedOptimizer* fused, OptimizerKind kind,
            std::vector<double> group_scales);
  ~Optimizer();

  OptimizerKind kind() const { return kind_; }
  std::string name() const;  // "sgd", "adam" or "adamw", as --optimizer spells it
  bool fused() const { return fused_ != nullptr; }
  // torch::optim's optimizer: its groups and per-parameter state.
  torch::optim::Optimizer& base() { return *base_; }
  std::vector<torch::optim::OptimizerParamGroup>& param_groups() { return base_->param_groups(); }
  auto& state() { return base_->state(); }

  // The update. Fused, it divides the gradients by the inputs given since the last update (the
  // grad scaler's scale, the clip divisor) and skips itself on the device where the overflow
  // flag is set; unfused, the gradients are taken as they are (the step unscaled and clipped them).
  void step();
  void zero_grad() { base_->zero_grad(/*set_to_none=*/true); }
  // Fused updates only (std::logic_error otherwise): what the next step() divides by and skips on.
  void set_scaler_inputs(torch::Tensor grad_scale, torch::Tensor found_inf);
  void set_clip_divisor(torch::Tensor divisor);

  // Every group at `lr` times its share (fine-tuning's layer decay, backbone scale; 1 without).
  void set_lr(double lr);
  // --cuda_graphs (fused only): the learning rate read from device tensors, which refresh_lr()
  // sets outside the graph before every step.
  void use_device_lr();
  void refresh_lr();
  // Checkpoints: the step counts brought up to date from the device before a save, and the
  // device's counters dropped after a state was loaded (no-ops unfused).
  void sync_steps();
  void steps_loaded();

 private:
  std::unique_ptr<torch::optim::Optimizer> base_;
  FusedOptimizer* fused_;
  OptimizerKind kind_;
  std::vector<double> group_scales_;
};

// Two kinds of parameter groups, in the order of their first parameter: weights decay, biases
// and norm scales (1-D) do not; `lr_scale` (fine-tuning) splits them further by their share of
// the learning rate. Every parameter is in a group, frozen ones too: they take no gradient, so
// the update passes them over and keeps no state for them until they are unfrozen.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, Net& model, const LrScale& lr_scale = nullptr);

}  // namespace gputrain
