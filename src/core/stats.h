// Summary statistics of timings.
#pragma once
#include <vector>

namespace gputrain {

// The q-quantile (0..1) by linear interpolation between the closest ranks (numpy's default);
// 0 for no values.
double percentile(std::vector<double> values, double q);

}  // namespace gputrain
