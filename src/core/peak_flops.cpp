// Peak FLOP rates: a table of GPUs, a formula for CPUs.
#include "core/peak_flops.h"

#include <fmt/format.h>

#include <fstream>

#include "core/host_info.h"

namespace gputrain {
namespace {

struct GpuPeak {
  const char* name;  // matched as a substring of the device name, first match wins
  double fp32, tf32, fp16, bf16;  // TFLOP/s, dense; 0 = no such tensor-core path
};

// Vendor data sheets, dense (no sparsity). More specific names come first.
const GpuPeak kGpus[] = {
    {"H100 PCIe", 51.2, 378, 756, 756},
    {"H100 NVL", 60, 418, 835, 835},
    {"H100", 67, 494.5, 989.5, 989.5},  // SXM
    {"H200", 67, 494.5, 989.5, 989.5},
    {"GH200", 67, 494.5, 989.5, 989.5},
    {"B200", 80, 1100, 2250, 2250},
    {"A100", 19.5, 156, 312, 312},
    {"A800", 19.5, 156, 312, 312},
    {"L40S", 91.6, 183, 362, 362},
    {"L40", 90.5, 90.5, 181, 181},
    {"L4", 30.3, 60, 121, 121},
    {"A10G", 31.2, 35, 70, 70},
    {"A10", 31.2, 62.5, 125, 125},
    {"RTX 4090", 82.6, 82.6, 165.2, 165.2},
    {"RTX 3090", 35.6, 35.6, 71, 71},
    {"V100", 15.7, 0, 125, 0},
    {"T4", 8.1, 0, 65, 0},
    {"P100", 9.3, 0, 18.7, 0},
};

// Read once a process: the fallback, the current clock, moves, and the variants of one
// benchmark must share one peak (their MFUs are compared).
double max_clock_hz() {
  static const double hz = [] {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");  // kHz
    double khz = 0;
    if (f >> khz && khz > 0) return khz * 1e3;
    try {
      return std::stod(cpuinfo_field("cpu MHz")) * 1e6;  // the current clock: a lower bound
    } catch (const std::exception&) {
      return 0.0;
    }
  }();
  return hz;
}

}  // namespace

PeakFlops gpu_peak_flops(const std::string& gpu_name, const std::string& dtype) {
  for (const auto& g : kGpus) {
    if (gpu_name.find(g.name) == std::string::npos) continue;
    const double t = dtype == "bf16" ? g.bf16 : dtype == "fp16" ? g.fp16 : dtype == "tf32" ? g.tf32 : g.fp32;
    if (t == 0) return {0, fmt::format("n/a: {} has no {} tensor cores", g.name, dtype)};
    return {t * 1e12, fmt::format("{} {} dense, {:.1f} TFLOP/s (data sheet)", g.name, dtype, t)};
  }
  return {0, "n/a: " + gpu_name + " is not in gputrain's table of peak rates"};
}

PeakFlops cpu_peak_flops(int threads, const std::string& dtype) {
  const std::string flags = " " + cpuinfo_field("flags") + " ";
  const double hz = max_clock_hz();
  if (hz <= 0 || threads <= 0) return {0, "n/a: the CPU clock is unknown"};
  auto has = [&](const char* flag) { return flags.find(std::string(" ") + flag + " ") != std::string::npos; };
  int lanes = has("avx512f") ? 16 : has("avx2") ? 8 : 4;  // fp32 per vector
  // AMD before Zen 5 (family 0x1A) runs 512-bit instructions on 256-bit units.
  int family = 0;
  try {
    family = std::stoi(cpuinfo_field("cpu family"));
  } catch (const std::exception&) {
  }
  if (lanes == 16 && cpuinfo_field("vendor_id") == "AuthenticAMD" && family < 0x1A) lanes = 8;
  double per_cycle = 2.0 * 2 * lanes;  // 2 FMA units x (multiply + add) x lanes
  std::string how = fmt::format("{} threads x {:.2f} GHz x 2 FMA units x {} fp32 lanes x 2", threads, hz / 1e9, lanes);
  if (dtype == "bf16" && has("amx_bf16")) {
    per_cycle = 1024;
    how = fmt::format("{} threads x {:.2f} GHz x 1024 (AMX bf16)", threads, hz / 1e9);
  } else if (dtype == "bf16" && has("avx512_bf16")) {
    per_cycle *= 2;
    how += " x 2 (AVX512-BF16 pairs)";
  }
  return {threads * hz * per_cycle, how};
}

}  // namespace gputrain
