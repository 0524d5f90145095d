// What the host CPU is and how much memory this process has used: read from /proc, no torch.
#pragma once
#include <cstdint>
#include <string>

namespace gputrain {

// The value of the first line of /proc/cpuinfo that starts with `key` ("" when none).
std::string cpuinfo_field(const std::string& key);
// "AMD EPYC 7B13" from /proc/cpuinfo, or "unknown".
std::string cpu_model();
// Whether the CPU has native bf16 arithmetic (AVX512-BF16 or AMX-BF16), where bf16 autocast
// beats fp32 (measured 1.48x on the quickstart CNN on a 2-core EPYC with AVX512-BF16).
bool cpu_has_bf16();

// Resident set size of this process now, in bytes (from /proc/self/statm).
int64_t rss_bytes();
// Peak resident set size of this process in bytes (from /proc/self/status).
int64_t peak_rss_bytes();
// Resets that peak to the current RSS (Linux: "5" into /proc/self/clear_refs).
void reset_peak_rss();

// Seconds since this process started (loading LibTorch's libraries included), from
// /proc/self/stat; 0 when it cannot be read.
double seconds_since_process_start();

}  // namespace gputrain
