// Sharded data parallel's layout (ZeRO): the trainable parameters end to end in one flat order,
// padded to a multiple of the ranks and cut into equal slices, one per rank. Rank r keeps the
// optimizer state of slice r alone; gradients are reduce-scattered into the slices and the
// updated slices all-gathered back (parallel/comm.h). A slice may begin or end inside a
// parameter: an elementwise update (SGD, Adam, AdamW) of part of a parameter is the update of
// those elements. Offsets count elements in each parameter's logical order (reshape(-1)), so
// they are the same on every rank whatever a tensor's memory format.
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
  int64_t total = 0;   // the parameters' elements end to end
  int64_t padded = 0;  // total rounded up to a multiple of the ranks (the padding holds zeros)
  int64_t shard = 0;   // padded / ranks: every rank's slice
  int64_t begin = 0;   // this rank's slice starts here in the flat order
  std::vector<ShardSegment> segments;  // the parameters' parts in this rank's slice, in order
};

// The layout of parameters of `numels` elements (in order) over `ranks` ranks, for `rank`.
ShardLayout shard_layout(const std::vector<int64_t>& numels, int ranks, int rank);

}  // namespace gputrain
