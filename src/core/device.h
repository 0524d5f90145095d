// The run context: which device, which speed switches are really on, and the report saying so.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "config/config.h"

namespace gputrain {

struct RunContext {
  torch::Device device = torch::kCPU;
  bool cuda = false;
  bool amp = false;
  torch::ScalarType amp_dtype = torch::kFloat;
  bool grad_scaler = false;  // fp16 autocast needs loss scaling; bf16 does not
  bool channels_last = false;
  bool pin_memory = false;
  bool non_blocking = false;
  // (what, state) pairs: device facts, then one line per optimization saying on/off and why.
  std::vector<std::pair<std::string, std::string>> report;
};

// Picks the device, applies the global switches (threads, seed, cuDNN, TF32) and explains each.
// Throws a usage error when the config asks for a device that is not there.
RunContext make_run_context(const Config& c);

// "AMD EPYC 7B13" from /proc/cpuinfo, or "unknown".
std::string cpu_model();
// Whether the CPU has native bf16 arithmetic (AVX512-BF16 or AMX-BF16), where bf16 autocast
// beats fp32 (measured 1.48x on the quickstart CNN on a 2-core EPYC with AVX512-BF16).
bool cpu_has_bf16();

// Peak resident set size of this process in bytes (from /proc/self/status).
int64_t peak_rss_bytes();
// Resets that peak to the current RSS (Linux: "5" into /proc/self/clear_refs).
void reset_peak_rss();

}  // namespace gputrain
