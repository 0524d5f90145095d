// Loss scaling for fp16 training, built on ATen's AMP kernels (there is no C++ GradScaler).
#pragma once
#include <vector>

#include <torch/types.h>

namespace gputrain {

class Optimizer;

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// Same contract as torch.amp.GradScaler: scale(loss).backward(); unscale_(opt); [clip];
// step(opt) skips the step when a gradient is inf/NaN; update() adjusts the scale.
// Disabled, every call is a pass-through.
class GradScaler {
 public:
  GradScaler(bool enabled, torch::Device device, GradScalerOptions options = {});

  bool enabled() const { return enabled_; }
  torch::Tensor scale(const torch::Tensor& loss) const;
  // Divides the gradients by the scale and records whether any was non-finite.
  void unscale_(Optimizer& optimizer);
  // Runs optimizer.step() unless the unscaled gradients had an inf/NaN, or `skip` (a device
  // flag from the step hooks, may be undefined) is 1. Returns the flag on the device (1: the
  // step was skipped; valid until the next step), undefined when neither can skip. A fused
  // optimizer gets the scale and the flag and skips on the device: no host sync. An unfused one
  // needs the flag on the host to decide (one sync per step, as in PyTorch). Only an overflow
  // backs the scale off.
  torch::Tensor step(Optimizer& optimizer, const torch::Tensor& skip = {});
  // Backs off after an overflow, grows after growth_interval clean steps.
  void update();
  double get_scale() const;
  // The scale as a device tensor (float32 [1]), without a host read; undefined when disabled.
  torch::Tensor scale_tensor() const { return enabled_ ? scale_ : torch::Tensor(); }

  // Checkpoints: the scale (float32 [1]) and the growth tracker (int32 [1]), on the CPU.
  std::pair<torch::Tensor, torch::Tensor> state() const { return {scale_.cpu(), growth_tracker_.cpu()}; }
  // Throws std::runtime_error (for the caller to word) for a state of the wrong size, or a scale
  // that is not a finite positive number.
  void load_state(const torch::Tensor& scale, const torch::Tensor& growth_tracker);

 private:
  bool enabled_;
  GradScalerOptions opt_;
  torch::Tensor scale_;           // float32 [1]
  torch::Tensor growth_tracker_;  // int32 [1]
  torch::Tensor found_inf_;       // float32 [1], sum over devices/dtypes of this step
  bool unscaled_ = false;

  // Sets found_inf_ from the gradients, dividing them by the scale when `unscale`.
  void check_(Optimizer& optimizer, bool unscale);
};

}  // namespace gputrain
