// The benchmark's optimization matrix: a baseline, each optimization alone, and all together.
// Whether a variant can run on this machine is the recipe resolver's answer for its config, so
// the benchmark skips exactly what `train` would turn off, with the same reason.
#pragma once
#include <string>
#include <vector>

#include "config/config.h"
#include "core/device_probe.h"

namespace gputrain {

struct Variant {
  std::string name;
  std::string description;
  Config config;        // the workload with this variant's switches, as requested
  Config resolved;      // as the resolver decided it for this machine
  std::string skipped;  // why this machine cannot run it; empty when it runs
};

// Every variant name, in table order.
std::vector<std::string> variant_names();

// The workload with every optimization off: fp32, no cuDNN autotune, no TF32, NCHW, loading on
// the main thread, pageable memory, blocking copies.
Config baseline_config(const Config& workload);

// Expands `selection` (empty = all) into variants for `machine`. Unknown names throw a usage
// error with a suggestion. The baseline is always included first: speedups need it.
std::vector<Variant> expand_variants(const Config& workload, const std::vector<std::string>& selection,
                                     const MachineInfo& machine);

// True for variants whose loss is comparable with the baseline's (same samples per step).
bool same_samples_as_baseline(const std::string& variant);

}  // namespace gputrain
