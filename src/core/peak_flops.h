// The device's peak FLOP rate for a precision: the denominator of MFU (model FLOPs utilization).
#pragma once
#include <string>

namespace gputrain {

struct PeakFlops {
  double flops = 0;    // per second; 0 when unknown
  std::string basis;   // how it was found, or why it is unknown (for the report)
};

// `dtype`: "fp32", "tf32", "fp16" or "bf16". Dense tensor-core figures from the vendors' data
// sheets, by GPU name; unknown GPUs get 0 and say so.
PeakFlops gpu_peak_flops(const std::string& gpu_name, const std::string& dtype);

// threads x clock x FMA units per core (2 on x86 cores since Haswell and Zen) x vector lanes
// x 2, from /proc/cpuinfo and cpufreq; bf16 counts twice the fp32 lanes with AVX512-BF16's
// pair dot products, 1024 per cycle with AMX.
PeakFlops cpu_peak_flops(int threads, const std::string& dtype);

}  // namespace gputrain
