// Learning-rate schedules with linear warm-up, evaluated per optimizer step.
#include "step/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace gputrain {
namespace {

// Cosine interpolation from a (t = 0) to b (t = 1).
double cosine(double a, double b, double t) {
  t = std::clamp(t, 0.0, 1.0);
  return b + (a - b) * 0.5 * (1.0 + std::cos(M_PI * t));
}

}  // namespace

double LrSchedule::at(int64_t step) const {
  if (kind == "onecycle") {
    // As torch's OneCycleLR: rise from base/25 to base over the warm-up (30% of the run when
    // none is given), then anneal to min_lr (base/1e4 when min_lr is 0).
    int64_t up = warmup_steps > 0 ? warmup_steps : std::max<int64_t>(1, total_steps * 3 / 10);
    double floor = min_lr > 0 ? min_lr : base_lr / 1e4;
    if (step < up) return cosine(base_lr / 25.0, base_lr, static_cast<double>(step) / up);
    return cosine(base_lr, floor, static_cast<double>(step - up) / std::max<int64_t>(1, total_steps - up));
  }
  if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / warmup_steps;
  if (kind == "step") {
    int64_t epoch = step / std::max<int64_t>(1, steps_per_epoch);
    return base_lr * std::pow(gamma, static_cast<double>(epoch / step_size_epochs));
  }
  if (kind == "cosine") {
    double t = static_cast<double>(step - warmup_steps) / std::max<int64_t>(1, total_steps - warmup_steps);
    return cosine(base_lr, min_lr, t);
  }
  return base_lr;
}

}  // namespace gputrain
