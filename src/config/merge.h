// Merges a Config: built-in defaults < device preset < --preset < --config file < flags.
// The device preset (--device_preset, default auto: from the GPU `probe` finds) is the speed
// recipe; --preset is the workload, whose values win where both set one (its lr is tuned for
// its batch size). A device preset given as --preset is the recipe, over the built-in workload.
#pragma once
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/config.h"
#include "config/device_presets.h"
#include "config/flag_arg.h"
#include "config/measured_preset.h"

namespace gputrain {

// Throws gputrain::Error listing every problem found (unknown flags, types, ranges) at once.
// `probe` is asked only for --device_preset auto; none means a machine without GPUs (tests).
// `fingerprint` too: with it, auto prefers a measured preset of this machine (measured_preset.h).
Config resolve_config(const std::vector<FlagArg>& flags, const GpuProbe& probe = nullptr,
                      const FingerprintProbe& fingerprint = nullptr);

// For --resume: the saved run's configuration (from its checkpoint) < flags. A --preset,
// --config or --device_preset flag must name the run's own (the original command line may be
// repeated; --device_preset auto is accepted): the recipe a run started with stays its recipe.
Config resolve_resumed_config(const nlohmann::json& saved, const std::vector<FlagArg>& flags);

}  // namespace gputrain
