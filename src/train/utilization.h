// How well a run uses its device: memory peaks per window (an epoch, an inference pass) and
// MFU, the model's FLOPs per second over the device's peak rate.
#pragma once
#include <nlohmann/json.hpp>

#include "core/device_probe.h"
#include "core/peak_flops.h"
#include "core/recipe.h"

namespace gputrain {

// The peak rate the step runs at: the GPU's for the autocast dtype (TF32 or fp32 without
// autocast), the CPU's over the intra-op threads.
PeakFlops device_peak_flops(const Recipe& r, const MachineInfo& m);

// Starts a window: resets the device's memory peaks (GPU: the caching allocator's; CPU: RSS).
void reset_memory_peaks(const Recipe& r);
// The peaks since the reset: GPU {peak_allocated_bytes, peak_reserved_bytes}, CPU {peak_rss_bytes}.
nlohmann::json memory_peaks(const Recipe& r);
// The largest of those peaks, for one column in a table.
int64_t peak_memory_bytes(const Recipe& r);

// Training MFU: 3 x forward FLOPs per sample x samples/s over the peak; 0 when either is unknown.
double training_mfu(double forward_flops, double samples_per_sec, const PeakFlops& peak);

}  // namespace gputrain
