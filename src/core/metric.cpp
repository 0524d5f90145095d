// The metrics table (metric.h).
#include "core/metric.h"

#include <fmt/format.h>

namespace gputrain {

const std::vector<Metric>& metrics() {
  using Task = Metric::Task;
  static const std::vector<Metric> table = {
      {"loss", false, Task::kAny},
      {"accuracy", true, Task::kClassification},
      {"top5", true, Task::kClassification, 5},
      {"f1", true, Task::kClassification},  // macro-F1: a label per sample, or several
      {"mae", false, Task::kRegression},
      {"rmse", false, Task::kRegression},
  };
  return table;
}

const Metric* find_metric(const std::string& name) {
  for (const auto& m : metrics())
    if (m.name == name) return &m;
  return nullptr;
}

std::vector<std::string> metric_names() {
  std::vector<std::string> names;
  for (const auto& m : metrics()) names.push_back(m.name);
  return names;
}

std::string metric_misfit(const Metric& m, bool regression, int64_t num_classes) {
  if (regression && m.task == Metric::Task::kClassification) return "this data is regression";
  if (!regression && m.task == Metric::Task::kRegression) return "this data is classification";
  if (!regression && num_classes < m.min_classes) return fmt::format("this data has {} classes", num_classes);
  return "";
}

}  // namespace gputrain
