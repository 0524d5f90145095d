// A quality for a run to reach (train and benchmark --until METRIC=VALUE). Torch-free: the
// configuration checks it.
#pragma once
#include <cstdint>
#include <string>

namespace gputrain {

struct FitTarget {
  std::string metric;      // an evaluation metric: accuracy, top5, f1, loss, mae or rmse
  double value = 0;        // reached at >= for accuracy and top5, at <= for the others
  int64_t eval_every = 0;  // also evaluate every N steps inside an epoch (0: at epoch ends only)
  bool higher_is_better() const;
  bool reached(double metric_value) const { return higher_is_better() ? metric_value >= value : metric_value <= value; }
  std::string text() const;  // "test_accuracy=0.92", as the flag is written
};

// "test_accuracy=0.92", "test_loss=0.3" (the test_ prefix may be left out). Throws a usage error.
FitTarget parse_target(const std::string& text);

// Throws a usage error when the metric does not apply to the training data (accuracy on
// regression, ...): `regression`, or classification into `num_classes`.
void check_target_applies(const FitTarget& target, bool regression, int64_t num_classes);

}  // namespace gputrain
