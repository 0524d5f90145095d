// The resolved configuration as the two-column table `train` prints at start.
#pragma once
#include "config/config.h"

namespace gputrain {

void print_config(const Config& c);

}  // namespace gputrain
