// Injected faults as step hooks (fault_hooks.h).
#include "step/fault_hooks.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/faults.h"

namespace gputrain {
namespace {

class FaultHooks : public StepHooks {
 public:
  FaultHooks(const GradScaler& scaler, int rank) : scaler_(scaler), rank_(rank) {}
  void begin(int64_t step) override {
    step_ = step;
    forwards_ = 0;
    if (faults().oom_forward < 0) oom_at("GPUTRAIN_FAULT_OOM_STEP");
  }
  void inputs(int64_t step, std::vector<Batch>& micro) override {
    // The float sample x is what these faults corrupt; named fields (ids) have none to.
    if (std::find(micro[0].names.begin(), micro[0].names.end(), "x") == micro[0].names.end()) return;
    // NAN_STEP=k: the first micro-batch of every step after the first k (steps counted from 1).
    if (faults().nan_step >= 0 && step > faults().nan_step && (faults().nan_rank < 0 || faults().nan_rank == rank_))
      micro[0].x() = micro[0].x() * std::nan("");
    // SPIKE_EVERY=k: negated and scaled up, confidently wrong where the model has learned.
    if (faults().spike_every > 0 && step % faults().spike_every == 0)
      for (auto& b : micro) b.x() = b.x() * -1000;
  }
  void before_forward(const Batch& b) override {
    if (++forwards_ == faults().oom_forward) oom_at("GPUTRAIN_FAULT_OOM_FORWARD");
    if (faults().oom_above >= 0 && b.samples() > faults().oom_above)
      TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by GPUTRAIN_FAULT_OOM_ABOVE");
  }
  torch::Tensor scaled(torch::Tensor loss) override {
    if (scaler_.enabled() && faults().overflow_step >= 0 && step_ >= faults().overflow_step)
      loss = loss * std::numeric_limits<double>::infinity();  // the gradients overflow, the loss does not
    return loss;
  }
  void before_update(int64_t step) override {
    if (step == faults().oom_update) TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by GPUTRAIN_FAULT_OOM_UPDATE");
  }

 private:
  const GradScaler& scaler_;
  int rank_;
  int64_t step_ = 0;
  bool oom_done_ = false;
  int64_t forwards_ = 0;  // in this step

  void oom_at(const char* by) {
    if (step_ != faults().oom_step || oom_done_) return;
    oom_done_ = true;  // once: the retry of the step goes through
    TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by ", by);
  }
};

}  // namespace

std::unique_ptr<StepHooks> fault_hooks(const GradScaler& scaler, int rank) {
  const Faults& f = faults();
  if (f.oom_step < 0 && f.oom_above < 0 && f.oom_update < 0 && f.overflow_step < 0 && f.nan_step < 0 &&
      f.spike_every < 0)
    return nullptr;
  return std::make_unique<FaultHooks>(scaler, rank);
}

}  // namespace gputrain
