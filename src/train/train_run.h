// A whole training run: data, model, loop, evaluation, checkpoints, metrics and the summary.
#pragma once
#include "config/config.h"

namespace gputrain {

// Returns the process exit code.
int run_training(Config c);

}  // namespace gputrain
