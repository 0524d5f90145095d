// The recipe: what this process runs on and which speed switches are on, each with the reason
// (the device report). Built by the resolver (train/resolve_recipe) from a Config and the probe;
// knows no Config itself.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "core/precision.h"

namespace gputrain {

struct Recipe {
  c10::Device device = c10::kCPU;
  bool cuda = false;
  Precision precision;  // autocast and loss scaling (core/precision.h)
  bool channels_last = false;
  bool pin_memory = false;
  bool non_blocking = false;
  bool fused_optimizer = false;  // the optimizer update in ATen's fused kernels
  bool cuda_graphs = false;      // the step captured once and replayed (Trainer)
  bool fused_head_loss = false;  // a language model's head computed with its loss, in chunks (step/head_loss.h)

  // Process-wide switches, set by apply_global_switches.
  int threads = 0;  // intra-op CPU threads
  uint64_t seed = 42;
  bool deterministic = false;
  bool cudnn_deterministic = false;
  bool cudnn_benchmark = false;
  bool tf32 = false;

  // (what, state) pairs: device facts, then one line per optimization saying on/off and why.
  std::vector<std::pair<std::string, std::string>> report;
};

// Sets torch's process-wide state from the recipe: threads, seed, determinism, cuDNN and TF32.
void apply_global_switches(const Recipe& r);

}  // namespace gputrain
