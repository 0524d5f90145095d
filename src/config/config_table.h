// The configuration as the table `train` prints at start: every field, requested -> resolved
// where the run decided a value, then why each was decided.
#pragma once
#include "config/resolved.h"

namespace gputrain {

void print_config_table(const ResolvedConfig& r);

}  // namespace gputrain
