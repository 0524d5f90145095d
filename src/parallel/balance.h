// --balance auto: how a global batch is split over ranks of different speeds and memory.
#pragma once
#include <cstdint>
#include <vector>

namespace gputrain {

// Batch sizes that add up to `global`, proportional to each rank's speed (1 / `seconds` per
// probe step), none above its `capacity` (samples that fit its device memory; <= 0: no limit)
// while the others can take the rest; each at least 1. When the capacities cannot hold the
// global batch, the split by speed alone (the out-of-memory backoff then splits batches).
std::vector<int64_t> split_by_speed(const std::vector<double>& seconds, const std::vector<double>& capacity,
                                    int64_t global);

}  // namespace gputrain
