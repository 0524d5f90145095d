// `gputrain train`: a whole run, from the command line's flags to the summary.
#pragma once
#include <vector>

#include "config/flag_arg.h"

namespace gputrain {

// Merges the configuration (defaults < preset < --config < flags; with --resume, the resumed
// run's requested configuration < flags), builds the Session and the run folder, fits, and
// writes the summary. Returns the process exit code.
int run_training(const std::vector<FlagArg>& flags);

}  // namespace gputrain
