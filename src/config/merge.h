// Merges a Config: built-in defaults < --preset < --config file < command-line flags.
#pragma once
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/config.h"
#include "config/flag_arg.h"

namespace gputrain {

// Throws gputrain::Error listing every problem found (unknown flags, types, ranges) at once.
Config resolve_config(const std::vector<FlagArg>& flags);

// For --resume: the saved run's configuration (from its checkpoint) < flags. A --preset or
// --config flag must name the run's own (the original command line may be repeated).
Config resolve_resumed_config(const nlohmann::json& saved, const std::vector<FlagArg>& flags);

}  // namespace gputrain
