// Sharded data parallel's layout: equal slices that cover every parameter's elements once.
#include <catch2/catch.hpp>

#include <ostream>

#include "parallel/shard_layout.h"

using namespace gputrain;

namespace gputrain {
// For Catch's messages.
std::ostream& operator<<(std::ostream& os, const ShardSegment& s) {
  return os << "{param " << s.param << ", at " << s.param_offset << ", slice " << s.shard_offset << ", " << s.length << "}";
}
}  // namespace gputrain

TEST_CASE("shard layout: the ranks' slices are equal, padded at the end, and cover each parameter's elements once, "
          "cut inside parameters where they fall",
          "[dist]") {
  const std::vector<int64_t> numels = {6, 1, 10, 3};  // 20 elements
  for (int ranks : {1, 2, 3, 7, 40}) {
    INFO("ranks " << ranks);
    std::vector<std::vector<int>> seen(numels.size());
    for (size_t p = 0; p < numels.size(); ++p) seen[p].assign(static_cast<size_t>(numels[p]), 0);
    for (int r = 0; r < ranks; ++r) {
      const auto l = shard_layout(numels, ranks, r);
      CHECK(l.total == 20);
      CHECK(l.padded % ranks == 0);
      CHECK(l.padded - l.total < ranks);
      CHECK(l.begin == r * l.shard);
      int64_t next = 0;  // segments sit end to end from the slice's start
      for (const auto& s : l.segments) {
        CHECK(s.shard_offset == next);
        next += s.length;
        for (int64_t i = 0; i < s.length; ++i) ++seen[s.param][static_cast<size_t>(s.param_offset + i)];
      }
      CHECK(next == std::min(l.shard, std::max<int64_t>(0, l.total - l.begin)));
    }
    for (const auto& p : seen)
      for (int count : p) CHECK(count == 1);
  }
  // Two ranks: slice 0 is elements 0..9 (parameter 0, 1 and the first 3 of 2), slice 1 the rest.
  CHECK(shard_layout(numels, 2, 0).segments ==
        std::vector<ShardSegment>{{0, 0, 0, 6}, {1, 0, 6, 1}, {2, 0, 7, 3}});
  CHECK(shard_layout(numels, 2, 1).segments == std::vector<ShardSegment>{{2, 3, 0, 7}, {3, 0, 7, 3}});
  CHECK_THROWS(shard_layout(numels, 2, 2));
}

TEST_CASE("shard layout: aligned, every parameter and every slice starts at a multiple of the alignment, and the "
          "slices still cover each element once",
          "[dist]") {
  const std::vector<int64_t> numels = {108, 1, 40, 16, 3};
  const int64_t align = 16;
  for (int ranks : {1, 2, 3, 5}) {
    INFO("ranks " << ranks);
    std::vector<std::vector<int>> seen(numels.size());
    for (size_t p = 0; p < numels.size(); ++p) seen[p].assign(static_cast<size_t>(numels[p]), 0);
    for (int r = 0; r < ranks; ++r) {
      const auto l = shard_layout(numels, ranks, r, align);
      CHECK(l.starts == std::vector<int64_t>{0, 112, 128, 176, 192});
      CHECK(l.total == 195);
      CHECK(l.shard % align == 0);
      CHECK(l.padded == l.shard * ranks);
      CHECK(l.padded >= l.total);
      for (const auto& s : l.segments) {
        // A cut inside a parameter falls on a multiple of the alignment from its start.
        CHECK(s.param_offset % align == 0);
        CHECK(l.begin + s.shard_offset == l.starts[s.param] + s.param_offset);
        for (int64_t i = 0; i < s.length; ++i) ++seen[s.param][static_cast<size_t>(s.param_offset + i)];
      }
    }
    for (const auto& p : seen)
      for (int count : p) CHECK(count == 1);
  }
  // Two ranks: 195 elements -> slices of 112; the first parameter's whole 108 in slice 0.
  CHECK(shard_layout(numels, 2, 0, align).segments == std::vector<ShardSegment>{{0, 0, 0, 108}});
  CHECK(shard_layout(numels, 2, 1, align).segments ==
        std::vector<ShardSegment>{{1, 0, 0, 1}, {2, 0, 16, 40}, {3, 0, 64, 16}, {4, 0, 80, 3}});
}
