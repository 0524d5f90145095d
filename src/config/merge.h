// Merges a Config: built-in defaults < --preset < --config file < command-line flags.
#pragma once
#include <vector>

#include "cli/args.h"
#include "config/config.h"

namespace gputrain {

// Throws gputrain::Error listing every problem found (unknown flags, types, ranges) at once.
Config resolve_config(const std::vector<FlagArg>& flags);

}  // namespace gputrain
