// The fit loop's evaluations (fit_evaluations.h).
#include "train/fit_evaluations.h"

namespace gputrain {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

FitEvaluations::FitEvaluations(const Session& s)
    : test_(s.data().test, s.eval_loader_options(s.config().eval_batch_size, /*sharded=*/true)) {}

bool FitEvaluations::run(Trainer& trainer, Comm* comm, const std::function<bool()>& stop, EvalResult& raw,
                         EvalResult& averaged) {
  const auto start = std::chrono::steady_clock::now();
  raw = evaluate(trainer, test_, stop, comm);
  averaged = EvalResult{};
  if (trainer.ema() && !raw.interrupted) {
    trainer.ema()->gather();  // --shard: every rank's slices of the average, for this evaluation
    trainer.ema()->swap(trainer.model());
    averaged = evaluate(trainer, test_, stop, comm);
    trainer.ema()->swap(trainer.model());
    trainer.ema()->release();
  }
  if (raw.interrupted || averaged.interrupted) {
    raw = averaged = EvalResult{};
    return false;
  }
  last_ = seconds_since(start);
  total_ += last_;
  return true;
}

double FitEvaluations::training_seconds() const { return seconds_since(fit_start_) - total_; }

}  // namespace gputrain
