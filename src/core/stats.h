// Summary statistics of timings.
#pragma once
#include <vector>

namespace gputrain {

// The q-quantile (0..1) by linear interpolation between the closest ranks (numpy's default);
// 0 for no values.
double percentile(std::vector<double> values, double q);

// Samples per second: `samples` over `seconds`, 0 when no time passed. One rule for every
// throughput figure (the log lines, the epochs' records, the benchmark's tables).
inline double samples_per_second(double samples, double seconds) { return seconds > 0 ? samples / seconds : 0; }

}  // namespace gputrain
