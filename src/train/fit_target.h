// A quality for a run to reach (benchmark --until METRIC=VALUE). Torch-free: the command line
// parses it.
#pragma once
#include <cstdint>
#include <string>

namespace gputrain {

struct FitTarget {
  std::string metric;      // an evaluation metric: accuracy, top5, loss, mae or rmse
  double value = 0;        // reached at >= for accuracy and top5, at <= for the others
  int64_t eval_every = 0;  // also evaluate every N steps inside an epoch (0: at epoch ends only)
  bool higher_is_better() const;
  std::string text() const;  // "test_accuracy=0.92", as the flag is written
};

// "test_accuracy=0.92", "test_loss=0.3" (the test_ prefix may be left out). Throws a usage error.
FitTarget parse_target(const std::string& text);

}  // namespace gputrain
