// The metrics an evaluation reports: their names, which way is better, and the data they fit.
// One table for everything that names a metric: --monitor_metric, --until, "best", early
// stopping, the target check, and the checks of a metric against the data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gputrain {

struct Metric {
  enum class Task { kAny, kClassification, kRegression };
  std::string name;       // as flags and records spell it: "accuracy" (records prefix it: test_accuracy)
  bool higher_is_better;  // accuracy and top5; lower losses and errors are better
  Task task;
  int64_t min_classes = 0;  // top5 needs 5 classes
};

// loss, accuracy, top5, f1 (macro), mae, rmse.
const std::vector<Metric>& metrics();
// The metric called `name`, or null.
const Metric* find_metric(const std::string& name);
std::vector<std::string> metric_names();
// What in the data `m` does not fit ("" when it fits): "this data is regression" (for a
// classification metric), "this data is classification", "this data has 3 classes" (top5).
std::string metric_misfit(const Metric& m, bool regression, int64_t num_classes);

}  // namespace gputrain
