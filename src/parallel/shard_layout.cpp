// Sharded data parallel's layout (shard_layout.h).
#include "parallel/shard_layout.h"

#include <algorithm>
#include <stdexcept>

namespace gputrain {

ShardLayout shard_layout(const std::vector<int64_t>& numels, int ranks, int rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks) throw std::logic_error("shard_layout: rank outside 0..ranks-1");
  ShardLayout l;
  for (int64_t n : numels) l.total += n;
  l.shard = (l.total + ranks - 1) / ranks;
  l.padded = l.shard * ranks;
  l.begin = l.shard * rank;
  const int64_t end = l.begin + l.shard;
  int64_t start = 0;  // the parameter's first element in the flat order
  for (size_t p = 0; p < numels.size(); start += numels[p++]) {
    const int64_t from = std::max(start, l.begin), to = std::min(start + numels[p], end);
    if (from < to) l.segments.push_back({p, from - start, from - l.begin, to - from});
  }
  return l;
}

}  // namespace gputrain
