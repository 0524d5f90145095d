// Summary statistics of timings.
#pragma once
#include <cstdint>
#include <vector>

namespace gputrain {

// The q-quantile (0..1) by linear interpolation between the closest ranks (numpy's default);
// 0 for no values.
double percentile(std::vector<double> values, double q);

// Samples per second: `samples` over `seconds`, 0 when no time passed. One rule for every
// throughput figure (the log lines, the epochs' records, the benchmark's tables).
inline double samples_per_second(double samples, double seconds) { return seconds > 0 ? samples / seconds : 0; }

// The same over `steps` steps of `samples_per_step` in `seconds`, leaving out the `profiled`
// steps among them and their `profiled_seconds` (the profiler slows them), unless that leaves
// nothing.
inline double unprofiled_samples_per_second(int64_t steps, double seconds, int64_t samples_per_step,
                                            int64_t profiled, double profiled_seconds) {
  if (profiled > 0 && profiled < steps) {
    steps -= profiled;
    seconds -= profiled_seconds;
  }
  return samples_per_second(static_cast<double>(steps * samples_per_step), seconds);
}

}  // namespace gputrain
