// channels_last that holds for every 4-D shape.
#pragma once
#include <ATen/core/Tensor.h>

namespace gputrain {

// A 4-D tensor with channels-last strides that ATen's kernels read as channels_last. Why not
// `contiguous(ChannelsLast)`: it returns the tensor as it is when its strides already qualify,
// and with a size-1 channel or spatial dimension (a 1-channel image batch, a first conv's
// [out, 1, k, k] weight) plain NCHW strides do; the kernels then see NCHW
// (suggest_memory_format), so a 1-channel model ran its first conv, BatchNorm and pooling in
// NCHW, and the bf16 NCHW max-pool alone took a fifth of a CPU step. Other tensors: unchanged.
inline at::Tensor to_channels_last(const at::Tensor& t) {
  if (t.dim() != 4 || t.suggest_memory_format() == at::MemoryFormat::ChannelsLast) return t;
  return t.to(t.options(), /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::ChannelsLast);
}

}  // namespace gputrain
