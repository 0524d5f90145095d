// --until METRIC=VALUE: its parse, and whether it applies to the data.
#include "config/fit_target.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/metric.h"
#include "core/text.h"

namespace gputrain {

// The value as typed (shortest round-trip form): 0.9999 must not print as 1.
std::string FitTarget::text() const { return fmt::format("test_{}={}", metric, value); }

bool FitTarget::higher_is_better() const {
  const Metric* m = find_metric(metric);
  return m && m->higher_is_better;
}

FitTarget parse_target(const std::string& text) {
  const std::string hint = "write --until METRIC=VALUE, e.g. --until test_accuracy=0.92 or --until test_loss=0.3";
  const size_t eq = text.find('=');
  if (eq == std::string::npos) throw usage_error("--until '" + text + "' has no '='", hint);
  FitTarget t;
  t.metric = text.substr(0, eq);
  if (t.metric.rfind("test_", 0) == 0) t.metric = t.metric.substr(5);
  // val_loss: what nanoGPT and llm.c call the loss on the held-out (--test_file) split.
  else if (t.metric.rfind("val_", 0) == 0) t.metric = t.metric.substr(4);
  if (!find_metric(t.metric)) {
    std::vector<std::string> names;
    for (const auto& m : metric_names()) names.push_back("test_" + m);
    throw usage_error("--until names the metric '" + text.substr(0, eq) + "'", "one of " + join(names, ", "));
  }
  const std::string value = text.substr(eq + 1);
  char* end = nullptr;
  t.value = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(t.value))
    throw usage_error("--until '" + text + "' has the value '" + value + "' (expected a number)", hint);
  if (t.higher_is_better() ? t.value <= 0 || t.value > 1 : t.value < 0)
    throw usage_error(fmt::format("--until {} is out of range ({})", text,
                                  t.higher_is_better() ? "a fraction in (0, 1]" : "a value >= 0"),
                      hint);
  return t;
}

void check_target_applies(const FitTarget& target, bool regression, int64_t num_classes) {
  const Metric* m = find_metric(target.metric);
  const std::string misfit = m ? metric_misfit(*m, regression, num_classes) : "an unknown metric";
  if (!misfit.empty())
    throw usage_error("--until test_" + target.metric + ": " + misfit,
                      regression ? "use test_loss, test_mae or test_rmse" : "use test_accuracy or test_loss");
}

}  // namespace gputrain
