// Sharded data parallel's layout (shard_layout.h).
#include "parallel/shard_layout.h"

#include <algorithm>
#include <stdexcept>

namespace gputrain {

ShardLayout shard_layout(const std::vector<int64_t>& numels, int ranks, int rank, int64_t align) {
  if (ranks < 1 || rank < 0 || rank >= ranks) throw std::logic_error("shard_layout: rank outside 0..ranks-1");
  if (align < 1) throw std::logic_error("shard_layout: align below 1");
  const auto round_up = [](int64_t n, int64_t to) { return (n + to - 1) / to * to; };
  ShardLayout l;
  for (int64_t n : numels) {
    l.starts.push_back(round_up(l.total, align));
    l.total = l.starts.back() + n;
  }
  l.shard = round_up((l.total + ranks - 1) / ranks, align);
  l.padded = l.shard * ranks;
  l.begin = l.shard * rank;
  const int64_t end = l.begin + l.shard;
  for (size_t p = 0; p < numels.size(); ++p) {
    const int64_t start = l.starts[p];
    const int64_t from = std::max(start, l.begin), to = std::min(start + numels[p], end);
    if (from < to) l.segments.push_back({p, from - start, from - l.begin, to - from});
  }
  return l;
}

}  // namespace gputrain
