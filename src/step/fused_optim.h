// AdamW, Adam and SGD whose update runs in ATen's fused kernels (_fused_adamw_, _fused_adam_,
// _fused_sgd_): one kernel per device and dtype over every tensor, where torch::optim launches
// several per tensor. They keep torch::optim's parameter state (the same checkpoint records),
// so a run may switch between fused and unfused on resume.
#pragma once
#include <unordered_map>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace gputrain {

// What the step hands a fused optimizer for its next update: gradients are divided by
// `grad_scale` (the grad scaler's) and by `clip_divisor` (1 / the clip coefficient) inside the
// update, either undefined when it does not apply, and the whole step, step counts included,
// is skipped on the device where `found_inf` is non-zero. No host sync, and no pass over the
// gradients to unscale or clip them.
class FusedOptimizer {
 public:
  virtual ~FusedOptimizer() = default;
  void set_scaler_inputs(torch::Tensor grad_scale, torch::Tensor found_inf) {
    grad_scale_ = std::move(grad_scale);
    found_inf_ = std::move(found_inf);
  }
  void set_clip_divisor(torch::Tensor divisor) { clip_divisor_ = std::move(divisor); }

  // For CUDA graphs: the kernels read each group's learning rate from a device tensor, which
  // refresh_lr() sets from the options outside the graph before every step (a number passed to
  // a captured kernel would stay what it was at capture, whatever the schedule says).
  void use_device_lr() { device_lr_ = true; }
  void refresh_lr(std::vector<torch::optim::OptimizerParamGroup>& groups);

  // Checkpoints: sync_steps() brings the state's step counts up to date from the device's
  // counters (a device read); steps_loaded() drops those counters after a new state was put in.
  virtual void sync_steps() {}
  virtual void steps_loaded() {}

 protected:
  torch::Tensor grad_scale_, found_inf_, clip_divisor_;  // used by one step, then cleared
  // The one divisor the kernels take: grad_scale_ x clip_divisor_ (undefined: neither).
  torch::Tensor divisor() const;
  void clear_inputs() { grad_scale_ = found_inf_ = clip_divisor_ = torch::Tensor(); }
  bool device_lr_ = false;
  // Group `group`'s learning rate on `device`, created by refresh_lr(); one per group and device.
  const torch::Tensor& lr_on(size_t group, const torch::Device& device);

 private:
  std::vector<std::vector<torch::Tensor>> lr_;
};

// Adam and AdamW: the kernels count steps in float tensors on the device; the state's integer
// step is brought up to date from them when the optimizer is saved.
template <class Base, class Options, class State>
class FusedAdamBase : public Base, public FusedOptimizer {
 public:
  using Base::Base;
  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override;
  void sync_steps() override;
  void steps_loaded() override { steps_.clear(); }  // rebuilt from the loaded integer steps

 private:
  std::unordered_map<void*, torch::Tensor> steps_;  // by parameter, as the state is keyed
};

using FusedAdamW = FusedAdamBase<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState>;
using FusedAdam = FusedAdamBase<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState>;

class FusedSGD : public torch::optim::SGD, public FusedOptimizer {
 public:
  using torch::optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace gputrain
