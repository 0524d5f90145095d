// Sharded data parallel's layout (ZeRO): the trainable parameters in one flat order, each from a
// multiple of `align` elements, padded to a multiple of the ranks and cut into equal slices, one
// per rank, each a multiple of `align` long. Rank r keeps the
// optimizer state of slice r alone; gradients are reduce-scattered into the slices and the
// updated slices all-gathered back (parallel/comm.h). A slice may begin or end inside a
// parameter: an elementwise update (SGD, Adam, AdamW) of part of a parameter is the update of
// those elements. Offsets count elements in each parameter's logical order (reshape(-1)), so
// they are the same on every rank whatever a tensor's memory format.
//
// Why the alignment: the CPU's fused optimizer kernels work in blocks of 64 bytes from a
// tensor's first element, vectorized, and the elements past the last whole vector in scalar
// code, which rounds differently (no fused multiply-add). A slice cut anywhere would update
// some elements in the other code than the whole parameter does: 1-ulp differences that a
// network with BatchNorm, or Adam on a gradient that is zero in exact arithmetic (an attention
// key's bias), grows to the size of the learning rate within a few steps. Cut at multiples of
// 64 bytes from each parameter's start, every element takes the road it takes unsharded.
#pragma once
#include <cstdint>
#include <vector>

namespace gputrain {

// Part of parameter `param` in a rank's slice: its elements [param_offset, param_offset +
// length) sit at [shard_offset, shard_offset + length) of the slice.
struct ShardSegment {
  size_t param = 0;
  int64_t param_offset = 0, shard_offset = 0, length = 0;
  bool operator==(const ShardSegment& o) const {
    return param == o.param && param_offset == o.param_offset && shard_offset == o.shard_offset && length == o.length;
  }
};

struct ShardLayout {
  std::vector<int64_t> starts;  // each parameter's first element in the flat order
  int64_t total = 0;   // the last parameter's end (the gaps between parameters hold zeros)
  int64_t padded = 0;  // total rounded up to ranks x align (the padding holds zeros)
  int64_t shard = 0;   // padded / ranks: every rank's slice
  int64_t begin = 0;   // this rank's slice starts here in the flat order
  std::vector<ShardSegment> segments;  // the parameters' parts in this rank's slice, in order
};

// The layout of parameters of `numels` elements (in order) over `ranks` ranks, for `rank`, each
// parameter and slice starting at a multiple of `align` elements (64 bytes' worth: 16 floats).
ShardLayout shard_layout(const std::vector<int64_t>& numels, int ranks, int rank, int64_t align = 1);

}  // namespace gputrain
