// Sharded data parallel (ZeRO, parallel/grad_sync.h): the part of a parameter in this rank's
// slice, which the optimizer updates and the EMA averages. Its own header: both take it.
#pragma once
#include <cstdint>

#include <torch/types.h>

namespace gputrain {

// Elements [offset, offset + flat.numel()) of `param` in its logical order (reshape(-1)); `flat`
// views this rank's slice buffer. Checkpoints key a piece's state by (parameter position, offset).
struct ShardPiece {
  torch::Tensor param;  // the model's
  int64_t offset = 0;
  torch::Tensor flat;
};

}  // namespace gputrain
