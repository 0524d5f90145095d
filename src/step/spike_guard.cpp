// The loss-spike guard as a step hook (spike_guard.h).
#include "step/spike_guard.h"

#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace gputrain {
namespace {

// The mean of the first kWindow losses, then an exponential average over about that many: it
// follows a loss that falls as training goes on, and one spike moves it little.
constexpr double kWindow = 100;
// No judgement before a few losses are in: one or two early steps say little of the usual loss.
constexpr double kWarmup = 10;

class SpikeGuard : public StepHooks {
 public:
  SpikeGuard(double factor, torch::Device device)
      : factor_(factor),
        mean_(torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device))),
        count_(torch::zeros({}, mean_.options())) {}

  torch::Tensor skip_update(const torch::Tensor& loss) override {
    const auto l = loss.detach().to(torch::kDouble).reshape({});
    const auto skip = (count_ >= kWarmup).logical_and(l > factor_ * mean_).to(torch::kFloat).reshape({1});
    // A skipped loss stays out of the mean (a spike would raise the bar for the next one), and so
    // does a non-finite one (the grad scaler and the NaN guard answer those).
    const auto taken = (1 - skip.to(torch::kDouble).reshape({})) * torch::isfinite(l).to(torch::kDouble);
    const auto finite_l = torch::nan_to_num(l, 0, 0, 0);
    count_.add_(taken);
    mean_.add_(taken * (finite_l - mean_) / torch::clamp(count_, 1, kWindow));
    return skip;
  }

  void state(StepState& out) const override {
    out.emplace_back("spike_guard.mean", mean_);
    out.emplace_back("spike_guard.count", count_);
  }

  void load_state(const StepState& in) override {
    std::vector<std::pair<torch::Tensor*, torch::Tensor>> found;
    for (const auto& [name, t] : in) {
      torch::Tensor* mine = name == "spike_guard.mean" ? &mean_ : name == "spike_guard.count" ? &count_ : nullptr;
      if (!mine) continue;  // another hook's
      // A mean and a count of losses: finite numbers, not negative. Checked before either is set.
      const double v = t.numel() == 1 && t.is_floating_point() ? t.item<double>() : -1;
      if (!std::isfinite(v) || v < 0) throw std::runtime_error(fmt::format("its {} is not a number >= 0", name));
      found.emplace_back(mine, t);
    }
    for (auto& [mine, t] : found) mine->copy_(t.reshape({}));  // in place: a captured graph holds these tensors
  }

 private:
  double factor_;
  torch::Tensor mean_, count_;  // float64 scalars on the run's device
};

}  // namespace

std::unique_ptr<StepHooks> spike_guard(double factor, torch::Device device) {
  return std::make_unique<SpikeGuard>(factor, device);
}

}  // namespace gputrain
