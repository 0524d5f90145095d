// The fit loop's evaluations: the raw weights' and, when kept, the moving average's, on this
// rank's share of the test set, timed apart from training (the time to a target leaves them out,
// and the deadline keeps room for one).
#pragma once
#include <chrono>
#include <functional>

#include "data/loader.h"
#include "train/evaluate.h"
#include "train/session.h"

namespace gputrain {

class FitEvaluations {
 public:
  explicit FitEvaluations(const Session& s);

  // Both evaluations; false, both left empty, when `stop` (polled between batches) interrupted them.
  bool run(Trainer& trainer, Comm* comm, const std::function<bool()>& stop, EvalResult& raw, EvalResult& averaged);
  // The fit began: the training time counts from here.
  void start_clock() { fit_start_ = std::chrono::steady_clock::now(); }
  double last_seconds() const { return last_; }
  double total_seconds() const { return total_; }
  // Training time since the fit began: the wall time less the evaluations'.
  double training_seconds() const;

 private:
  Loader test_;
  std::chrono::steady_clock::time_point fit_start_ = std::chrono::steady_clock::now();
  double last_ = 0, total_ = 0;
};

}  // namespace gputrain
