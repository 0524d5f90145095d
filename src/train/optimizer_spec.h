// The run's optimizer flags as the step engine's OptimizerSpec (step/ knows no Config).
#pragma once
#include "config/config.h"
#include "step/optimizer.h"

namespace gputrain {

// --optimizer, --lr, --weight_decay, --momentum, --nesterov, --beta1, --beta2; `fused`: the
// recipe's fused_optimizer.
OptimizerSpec optimizer_spec(const Config& c, bool fused = false);

}  // namespace gputrain
