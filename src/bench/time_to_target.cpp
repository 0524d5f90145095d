// --until: the medians over seeds.
#include "bench/time_to_target.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gputrain {

namespace {

// The middle value (the mean of the middle two for an even count), infinite values included:
// percentile()'s interpolation would make NaN of them.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

TargetResult summarize(std::vector<TargetRun> runs) {
  TargetResult r;
  r.runs = std::move(runs);
  if (r.runs.empty()) return r;
  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<double> seconds, steps, epochs, evals, metrics, speeds;
  for (const auto& run : r.runs) {
    r.reached_count += run.reached;
    seconds.push_back(run.reached ? run.seconds : kNever);
    steps.push_back(run.reached ? static_cast<double>(run.steps) : kNever);
    epochs.push_back(run.reached ? run.epochs : kNever);
    evals.push_back(run.eval_seconds);
    if (std::isfinite(run.metric)) metrics.push_back(run.metric);  // NaN: no evaluation ran
    speeds.push_back(run.samples_per_sec);
  }
  r.seconds = median(seconds);
  r.reached = std::isfinite(r.seconds);
  r.steps = median(steps);
  r.epochs = median(epochs);
  r.worst_seconds = *std::max_element(seconds.begin(), seconds.end());
  r.eval_seconds = median(evals);
  r.metric = metrics.empty() ? std::nan("") : median(metrics);
  r.samples_per_sec = median(speeds);
  return r;
}

}  // namespace gputrain
