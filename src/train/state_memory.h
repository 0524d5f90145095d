// The memory a rank holds for training, beyond activations: the parameters, their gradients and
// the optimizer's state, in tracked tensor bytes. The session report prints it, so that what
// data parallel replicates on every rank (and what sharding would divide) is a number.
#pragma once
#include <cstdint>
#include <string>

#include "models/registry.h"
#include "step/ema.h"
#include "step/optimizer.h"

namespace gputrain {

struct StateMemory {
  int64_t parameters = 0, gradients = 0, optimizer = 0;
  int64_t ema = -1;  // the moving average's (--ema_decay), -1 without one
  // "parameters 13.4 MiB, gradients 13.4 MiB, adamw state 26.8 MiB (two moments)[, ema 13.4 MiB]"
  std::string text(const Optimizer& optimizer) const;
};

// From the model and the optimizer's kind: every parameter; a gradient for each trainable one
// (its dtype); and, for each trainable one, Adam's and AdamW's two moments or SGD's momentum
// buffer (none at momentum 0), in the parameter's dtype, as the update makes them at the first
// step. Frozen parameters take neither. Sharded (--shard), the optimizer's state is its pieces';
// the gradients at their peak are the full ones with `full_gradients` (--shard optimizer
// accumulates them until the step's last backward, then frees them as their buckets are
// reduced), else the pieces' sums (--shard gradients: a full gradient lives from backward
// until its bucket goes, which is not counted).
// With `ema`, what it holds too (sharded: this rank's slices and the frozen parameters' whole).
StateMemory expected_state_memory(Net& model, Optimizer& optimizer, bool full_gradients = true, const Ema* ema = nullptr);
// What each rank would hold without sharding.
StateMemory unsharded_state_memory(Net& model, Optimizer& optimizer, const Ema* ema = nullptr);

// The bytes of the tensors in the optimizer's state now (moments, momentum buffers).
int64_t optimizer_state_bytes(Optimizer& optimizer);

}  // namespace gputrain
