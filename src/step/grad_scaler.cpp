// Loss scaling for fp16 training on ATen's _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_ kernels (CPU kernels exist too, so the tests run here).
#include "step/grad_scaler.h"

#include <cmath>
#include <map>
#include <stdexcept>

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>

#include "step/optimizer.h"

namespace gputrain {

GradScaler::GradScaler(bool enabled, torch::Device device, GradScalerOptions options)
    : enabled_(enabled), opt_(options) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
  scale_ = torch::full({1}, opt_.init_scale, f32);
  growth_tracker_ = torch::zeros({1}, f32.dtype(torch::kInt));
  found_inf_ = torch::zeros({1}, f32);
}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) const {
  if (!enabled_) return loss;
  return loss * scale_.to(loss.device(), /*non_blocking=*/true);
}

void GradScaler::unscale_(Optimizer& optimizer) { check_(optimizer, true); }

void GradScaler::check_(Optimizer& optimizer, bool unscale) {
  if (!enabled_ || unscaled_) return;
  // The kernel wants the gradients grouped by device and dtype, with found_inf per group.
  std::map<std::string, std::vector<torch::Tensor>> groups;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params())
      if (p.grad().defined())
        groups[p.grad().device().str() + "/" + c10::toString(p.grad().scalar_type())].push_back(p.grad());
  auto inv_scale = unscale ? scale_.to(torch::kDouble).reciprocal().to(torch::kFloat) : torch::ones_like(scale_);
  found_inf_.zero_();
  for (auto& [key, grads] : groups) {
    auto device = grads[0].device();
    auto found = torch::zeros({1}, found_inf_.options().device(device));
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, inv_scale.to(device));
    found_inf_ += found.to(found_inf_.device());
  }
  optimizer.sum_over_ranks(found_inf_);  // sharded: each rank checked its slices alone; all skip together
  found_inf_.clamp_max_(1.0);  // a flag: the fused kernels skip only where it is exactly 1
  unscaled_ = unscale;
}

torch::Tensor GradScaler::step(Optimizer& optimizer, const torch::Tensor& skip) {
  // A fused update divides by the scale itself and skips on the device: only the overflow check
  // runs here (inverse scale 1), unless the gradients were unscaled for clipping already. An
  // unfused one is given unscaled gradients.
  const bool scaled = enabled_ && optimizer.fused() && !unscaled_;
  torch::Tensor flag;  // what skips the update: an overflow, the hooks' skip, or both
  if (enabled_) {
    check_(optimizer, /*unscale=*/!optimizer.fused());
    flag = found_inf_;
  }
  if (skip.defined()) flag = flag.defined() ? torch::maximum(flag, skip.to(flag.device()).reshape({1})) : skip;
  if (!flag.defined()) {
    optimizer.step();
    return {};
  }
  if (optimizer.fused()) {
    optimizer.set_scaler_inputs(scaled ? scale_ : torch::Tensor(), flag);
    optimizer.step();
  } else if (flag.item<float>() == 0.0f) {
    optimizer.step();
  }
  return flag;
}

void GradScaler::update() {
  if (!enabled_) return;
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, opt_.growth_factor, opt_.backoff_factor,
                         opt_.growth_interval);
  unscaled_ = false;
}

double GradScaler::get_scale() const { return enabled_ ? scale_.item<double>() : 1.0; }

void GradScaler::load_state(const torch::Tensor& s, const torch::Tensor& g) {
  if (s.numel() != 1 || g.numel() != 1) throw std::runtime_error("the grad scaler's state has the wrong size");
  if (!s.is_floating_point() || g.is_floating_point() || g.scalar_type() == torch::kBool)
    throw std::runtime_error("the grad scaler's state has the wrong dtypes");
  // A zero, negative or NaN scale would zero or skip every step without failing.
  const double scale = s.item<double>();
  if (!(scale > 0) || !std::isfinite(scale)) throw std::runtime_error("'scaler.scale' is not a finite positive number");
  if (g.item<int64_t>() < 0) throw std::runtime_error("the grad scaler's growth tracker is negative");
  scale_.copy_(s.reshape({1}));
  growth_tracker_.copy_(g.reshape({1}));
}

}  // namespace gputrain
