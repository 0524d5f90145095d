// Length bucketing: a shuffled epoch sorted by length in windows, still a permutation, batches of
// similar lengths, the same for every rank of a step, and less padding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "data/length_buckets.h"
#include "data/loader.h"

using namespace gputrain;

namespace {

// Sample i is the value i, of length 1 + (i * 37) % 50: lengths spread over the samples.
class Lengths : public Dataset {
 public:
  explicit Lengths(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return {1}; }
  int64_t num_classes() const override { return 2; }
  int64_t get(int64_t i, float* x, float*, uint64_t) const override {
    x[0] = static_cast<float>(i);
    return 0;
  }
  int64_t sample_length(int64_t i) const override { return 1 + (i * 37) % 50; }

 private:
  int64_t n_;
};

}  // namespace

TEST_CASE("length buckets: each window of a shuffled epoch is sorted by length, longest first, the order does not "
          "depend on the batch size, a step's ranks get similar lengths, and the batches pad less",
          "[data][loader]") {
  Lengths data(1003);
  LoaderOptions o;
  o.batch_size = 8;
  o.shuffle = true;
  o.seed = 5;
  const auto plain = sample_order(data, o, 0);
  o.bucket_window = 80;
  const auto bucketed = sample_order(data, o, 0);
  REQUIRE(bucketed.size() == 1003);
  for (size_t w = 0; w < 1003; w += 80) {
    const auto end = std::min<size_t>(w + 80, 1003);
    // The window holds the shuffled order's samples, longest first.
    CHECK(std::set<int64_t>(plain.begin() + w, plain.begin() + end) ==
          std::set<int64_t>(bucketed.begin() + w, bucketed.begin() + end));
    for (size_t i = w + 1; i < end; ++i) CHECK(data.sample_length(bucketed[i - 1]) >= data.sample_length(bucketed[i]));
  }
  CHECK(padding_share(bucketed, 8, data) < padding_share(plain, 8, data) / 2);
  // A pure function of seed and epoch, whatever the batch size; another epoch, another order.
  o.batch_size = 5;
  CHECK(sample_order(data, o, 0) == bucketed);
  CHECK(sample_order(data, o, 1) != bucketed);
  // Two ranks: a step's samples (2 x 8) are one run of the bucketed order, split in two.
  o.batch_size = 8;
  o.world_size = 2;
  o.drop_last = true;
  const auto r0 = sample_order(data, o, 0);
  o.rank = 1;
  const auto r1 = sample_order(data, o, 0);
  for (size_t b = 0; b + 8 <= r0.size(); b += 8) {
    std::set<int64_t> step(r0.begin() + b, r0.begin() + b + 8);
    step.insert(r1.begin() + b, r1.begin() + b + 8);
    CHECK(step == std::set<int64_t>(bucketed.begin() + 2 * b, bucketed.begin() + 2 * b + 16));
  }
}

TEST_CASE("length buckets: samples of no known length keep the shuffled order", "[data][loader]") {
  class Plain : public Lengths {
   public:
    using Lengths::Lengths;
    int64_t sample_length(int64_t) const override { return -1; }
  } data(100);
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = true;
  const auto plain = sample_order(data, o, 0);
  o.bucket_window = 5;
  CHECK(sample_order(data, o, 0) == plain);
}
