// GPUTRAIN_FAULT_* (core/faults.h) at the points of the step where real faults happen: out of
// memory at a step, above a chunk size or in the update, overflowing gradients, NaN inputs and
// loss spikes.
#pragma once
#include <memory>

#include "step/grad_scaler.h"
#include "step/step_hooks.h"

namespace gputrain {

// Null when no fault is asked for. `scaler` is the Trainer's (a new precision replaces its state,
// not the object); `rank` is this process's data-parallel rank (GPUTRAIN_FAULT_NAN_RANK).
std::unique_ptr<StepHooks> fault_hooks(const GradScaler& scaler, int rank);

}  // namespace gputrain
