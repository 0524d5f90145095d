// The benchmark's optimization matrix: a baseline, each optimization alone, and all together.
#pragma once
#include <string>
#include <vector>

#include "config/config.h"

namespace gputrain {

struct DeviceCaps {
  bool cuda = false;
  bool bf16 = false;  // native bf16: GPU compute capability 8.0+, or a CPU with AVX512/AMX-BF16
  bool tf32 = false;
  std::string name = "cpu";
};

struct Variant {
  std::string name;
  std::string description;
  Config config;        // the workload with this variant's switches
  std::string skipped;  // why this device cannot run it; empty when it runs
};

// Every variant name, in table order.
std::vector<std::string> variant_names();

// The workload with every optimization off: fp32, no cuDNN autotune, no TF32, NCHW, loading on
// the main thread, pageable memory, blocking copies.
Config baseline_config(const Config& workload);

// Expands `selection` (empty = all) into variants for this device. Unknown names throw a usage
// error with a suggestion. The baseline is always included first: speedups need it.
std::vector<Variant> expand_variants(const Config& workload, const std::vector<std::string>& selection,
                                     const DeviceCaps& caps);

// True for variants whose loss is comparable with the baseline's (same samples per step).
bool same_samples_as_baseline(const std::string& variant);

}  // namespace gputrain
