// The AMP numeric check: fp32 and autocast passes from the same weights on one batch, compared.
#include "train/amp_check.h"

#include <cmath>

#include <fmt/format.h>

#include "core/device_cuda.h"
#include "core/faults.h"
#include "core/autocast.h"
#include "step/head_loss.h"
#include "train/keep_state.h"

namespace gputrain {
namespace {

struct Pass {
  double loss = 0;
  std::vector<torch::Tensor> grads;  // fp32, unscaled, one per parameter (zeros where none)
  bool finite = true;
};

// Forward and backward from the current weights, the loss multiplied by `scale` before backward.
Pass run_pass(Trainer& t, const Batch& b, bool amp, c10::ScalarType dtype, double scale, bool inject_inf) {
  Net& model = t.model();
  t.optimizer().zero_grad();
  torch::Tensor loss;
  {
    AutocastGuard autocast(amp, t.context().device.type(), dtype);
    loss = output_loss(forward_for_loss(model, b, t.loss().fused_head), b.y(), t.loss());
  }
  if (inject_inf) loss = loss * std::numeric_limits<double>::infinity();
  (loss * scale).backward();
  Pass p;
  p.loss = loss.item<double>();
  for (const auto& w : model.parameters())
    p.grads.push_back(w.grad().defined() ? w.grad().to(torch::kFloat) / scale : torch::zeros_like(w, torch::kFloat));
  std::vector<torch::Tensor> finite;
  for (const auto& g : p.grads) finite.push_back(torch::isfinite(g).all().to(p.grads.front().device()));
  p.finite = std::isfinite(p.loss) && torch::stack(finite).all().item<bool>();
  return p;
}

double norm_of(const std::vector<torch::Tensor>& ts) {
  double sq = 0;
  for (const auto& t : ts) sq += t.square().sum().item<double>();
  return std::sqrt(sq);
}

AmpCheckResult run_check(Trainer& t, const Batch& batch, c10::ScalarType dtype, bool scaled, const AmpCheckOptions& o) {
  const std::string name = dtype == c10::kHalf ? "fp16" : "bf16";
  AmpCheckResult r;
  r.samples = batch.samples();
  for (int step = 0; step < o.steps; ++step) {
    RngState rng(t.context().device);  // dropout draws the same mask in both passes
    Pass ref = run_pass(t, batch, false, dtype, 1.0, false);
    if (!ref.finite) {
      r.summary = "not judged: the fp32 loss or gradient is not finite too (not a precision problem)";
      return r;
    }
    rng.restore();
    double scale = scaled ? 65536.0 : 1.0;
    Pass amp = run_pass(t, batch, true, dtype, scale, faults().amp_check > 0);
    while (scaled && std::isfinite(amp.loss) && !amp.finite && scale >= 1.0) {
      scale /= 2;
      rng.restore();
      amp = run_pass(t, batch, true, dtype, scale, false);
    }
    if (!std::isfinite(amp.loss)) {
      r.ok = false;
      r.summary = fmt::format("the {} loss is not finite (fp32: {:.4g})", name, ref.loss);
      return r;
    }
    if (!amp.finite) {
      r.ok = false;
      r.summary = fmt::format("the {} gradients overflow even unscaled (loss scale below 1)", name);
      return r;
    }
    r.loss_diff = std::max(r.loss_diff, std::abs(amp.loss - ref.loss) / std::max(std::abs(ref.loss), 1e-3));
    // The gradient's size, not its direction: in a deep network at initialization, bf16
    // rounding alone turns the gradient by tens of degrees (ResNet-50: cosine 0.45 to fp32) and
    // training still works; overflow, underflow and lost loss scaling change its size.
    const double ref_norm = norm_of(ref.grads);
    const double ratio = ref_norm > 0 ? norm_of(amp.grads) / ref_norm : 1.0;
    if (std::abs(std::log(ratio)) > std::abs(std::log(r.grad_ratio))) r.grad_ratio = ratio;
    if (r.loss_diff > o.loss_tolerance || std::abs(std::log(r.grad_ratio)) > std::log(o.grad_ratio_tolerance)) {
      r.ok = false;
      r.summary = fmt::format(
          "{} differs from fp32 by {:.2g}% in the loss (tolerance {:g}%), its gradient norm is {:.3g}x fp32's "
          "(tolerance {:g}x)",
          name, 100 * r.loss_diff, 100 * o.loss_tolerance, r.grad_ratio, o.grad_ratio_tolerance);
      return r;
    }
    // An SGD step on the fp32 gradient: the next comparison sees the weights move as training would.
    torch::NoGradGuard no_grad;
    auto params = t.model().parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].sub_(ref.grads[i].to(params[i].scalar_type()), o.lr);
  }
  r.summary = fmt::format("{} within {:.2g}% of fp32 in the loss, gradient norm {:.3g}x fp32's ({} steps, {} samples)",
                          name, 100 * r.loss_diff, r.grad_ratio, o.steps, r.samples);
  return r;
}

}  // namespace

AmpCheckResult check_amp(Trainer& trainer, const Batch& batch, c10::ScalarType dtype, bool scaled,
                         AmpCheckOptions options) {
  KeepRng keep_rng(trainer.context().device);
  TensorSnapshot weights(trainer.model(), /*with_parameters=*/true);
  trainer.model().train();
  int64_t n = std::min(batch.samples(), options.max_samples);
  AmpCheckResult r;
  while (true) {
    try {
      r = run_check(trainer, batch.narrow(0, n), dtype, scaled, options);
      break;
    } catch (const c10::OutOfMemoryError&) {
      trainer.optimizer().zero_grad();
      if (trainer.context().cuda) cuda_empty_cache();
      weights.restore();
      if (n == 1) {
        r = {};
        r.summary = "not judged: one sample in fp32 does not fit in memory";
        break;
      }
      n /= 2;
    }
  }
  trainer.optimizer().zero_grad();
  weights.restore();
  return r;
}

}  // namespace gputrain
