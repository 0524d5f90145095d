// The data pipeline around the formats: transforms, resize, statistics, held-out splits, the
// cache, regression batches, and the loader's sharding and buffer reuse.
#include <catch2/catch.hpp>

#include <set>

#include "data/cache.h"
#include "data/loader.h"
#include "data/subset.h"
#include "data/synthetic.h"
#include "data/transforms.h"

using namespace gputrain;

namespace {

// Regression: sample i is {i, 2i}, its target {3i}; counts its get() calls.
class Linear : public Dataset {
 public:
  explicit Linear(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return {2}; }
  int64_t num_classes() const override { return 0; }
  std::vector<int64_t> target_shape() const override { return {1}; }
  int64_t get(int64_t i, float* x, float* t, uint64_t) const override {
    ++calls;
    x[0] = static_cast<float>(i);
    x[1] = static_cast<float>(2 * i);
    t[0] = static_cast<float>(3 * i);
    return 0;
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_;
};

std::vector<float> sample(const Dataset& d, int64_t i, uint64_t seed = 1) {
  std::vector<float> x(static_cast<size_t>(d.sample_numel()));
  std::vector<float> t(static_cast<size_t>(std::max<int64_t>(1, d.target_numel())));
  d.get(i, x.data(), t.data(), seed);
  return x;
}

}  // namespace

TEST_CASE("data: regression batches carry float targets [B, T]", "[data]") {
  auto ds = std::make_shared<Linear>(10);
  Loader loader(ds, {.batch_size = 4, .num_workers = 2});
  loader.start_epoch(0);
  auto b = loader.next();
  REQUIRE(b);
  CHECK(b->y().scalar_type() == torch::kFloat);
  CHECK(b->y().sizes() == torch::IntArrayRef({4, 1}));
  CHECK(b->y()[3][0].item<float>() == 9.0f);
  CHECK(b->x()[3][1].item<float>() == 6.0f);
}

TEST_CASE("data: staging buffers are reused, not allocated per batch", "[data]") {
  auto ds = std::make_shared<SyntheticDataset>(4096, std::vector<int64_t>{1, 8, 8}, 4, 3);
  Loader loader(ds, {.batch_size = 16, .shuffle = true, .num_workers = 2, .prefetch_factor = 2, .seed = 1});
  for (int epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    while (loader.next()) {}
  }
  // 512 batches went through; the pool holds the prefetch window plus the few in hand.
  CHECK(loader.staging_buffers() <= 2 * 2 + 3);
}

TEST_CASE("data: a batch kept by the caller is never overwritten", "[data]") {
  auto ds = std::make_shared<Linear>(64);
  Loader loader(ds, {.batch_size = 4, .num_workers = 2});
  loader.start_epoch(0);
  auto first = loader.next()->x().clone();
  loader.start_epoch(0);
  auto kept = loader.next()->x();  // only the tensor survives, not the Batch
  while (loader.next()) {}
  CHECK(torch::equal(kept, first));
}

TEST_CASE("data: ranks split every epoch into disjoint, equal shards", "[data]") {
  auto ds = std::make_shared<Linear>(103);
  std::multiset<int64_t> all;
  std::vector<int64_t> lengths;
  for (int64_t rank = 0; rank < 4; ++rank) {
    Loader loader(ds, {.batch_size = 5, .shuffle = true, .num_workers = 1, .seed = 9, .rank = rank, .world_size = 4});
    auto order = loader.epoch_order(2);
    lengths.push_back(static_cast<int64_t>(order.size()));
    all.insert(order.begin(), order.end());
  }
  CHECK(lengths == std::vector<int64_t>{26, 26, 26, 26});  // 103 padded to 104
  CHECK(std::set<int64_t>(all.begin(), all.end()).size() == 103);
  CHECK(all.size() == 104);
}

TEST_CASE("data: validation split is seeded, disjoint and complete", "[data]") {
  auto ds = std::make_shared<Linear>(50);
  auto [train, val] = split_validation(ds, 0.2, 5);
  CHECK(train->size() == 40);
  CHECK(val->size() == 10);
  std::set<float> seen;
  for (auto* d : {train.get(), val.get()})
    for (int64_t i = 0; i < d->size(); ++i) seen.insert(sample(*d, i)[0]);
  CHECK(seen.size() == 50);
  auto again = split_validation(ds, 0.2, 5).second;
  auto other = split_validation(ds, 0.2, 6).second;
  CHECK(sample(*again, 0) == sample(*val, 0));
  bool differs = false;
  for (int64_t i = 0; i < 10; ++i) differs |= sample(*other, i) != sample(*val, i);
  CHECK(differs);
  CHECK_THROWS_WITH(split_validation(ds, 0.001, 5), Catch::Contains("leaves an empty split"));
}

TEST_CASE("data: the cache returns what the dataset gave, reading each sample once", "[data]") {
  auto base = std::make_shared<Linear>(20);
  CachedDataset cached(base);
  for (int pass = 0; pass < 3; ++pass)
    for (int64_t i = 0; i < 20; ++i) CHECK(sample(cached, i) == sample(*base, i));
  CHECK(base->calls == 20 + 3 * 20);  // 20 fills by the cache, plus the direct reference reads
}

TEST_CASE("data: channel statistics per channel (images) and per feature (rows)", "[data]") {
  auto ds = std::make_shared<Linear>(5);  // features {i} and {2i}, i = 0..4
  auto st = compute_channel_stats(*ds);
  REQUIRE(st.mean.size() == 2);
  CHECK(st.mean[0] == Approx(2.0));
  CHECK(st.mean[1] == Approx(4.0));
  CHECK(st.std[0] == Approx(std::sqrt(2.0)));
  CHECK(st.std[1] == Approx(std::sqrt(8.0)));
  // Normalizing with them gives zero mean, unit variance per feature.
  Normalize norm(st.mean, st.std);
  Rng rng(0);
  double s = 0, q = 0;
  for (int64_t i = 0; i < 5; ++i) {
    auto x = sample(*ds, i);
    norm.apply(x.data(), {2}, rng);
    s += x[1];
    q += x[1] * x[1];
  }
  CHECK(s / 5 == Approx(0).margin(1e-5));
  CHECK(q / 5 == Approx(1).margin(1e-5));
}

TEST_CASE("data: color jitter is seeded, stays in [0, 1], and changes colors", "[data]") {
  auto base = std::make_shared<SyntheticDataset>(8, std::vector<int64_t>{3, 6, 6}, 2, 1);
  ColorJitter jitter(0.4f, 0.4f, 0.4f, 0.1f);
  const std::vector<int64_t> shape{3, 6, 6};
  for (uint64_t seed = 0; seed < 8; ++seed) {
    auto a = sample(*base, 0), b = a, orig = a;
    Rng r1(seed), r2(seed);
    jitter.apply(a.data(), shape, r1);
    jitter.apply(b.data(), shape, r2);
    CHECK(a == b);
    CHECK(a != orig);
    for (float v : a) CHECK((v >= 0.0f && v <= 1.0f));
  }
  // Brightness alone scales every value by one factor.
  auto x = sample(*base, 1), y = x;
  Rng rng(3);
  ColorJitter(0.5f, 0, 0, 0).apply(y.data(), shape, rng);
  float factor = y[0] / x[0];
  CHECK(factor >= 0.5f);
  CHECK(factor <= 1.5f);
  for (size_t i = 0; i < x.size(); ++i) CHECK(y[i] == Approx(std::min(1.0f, x[i] * factor)).epsilon(1e-4));
}

TEST_CASE("data: log1p compresses counts, keeps sign, never makes NaN", "[data]") {
  std::vector<float> x{0, 1, 99, -3, 1e30f};
  Rng rng(0);
  Log1p().apply(x.data(), {5}, rng);
  CHECK(x[0] == 0);
  CHECK(x[1] == Approx(std::log(2.0)));
  CHECK(x[2] == Approx(std::log(100.0)));
  CHECK(x[3] == Approx(-std::log(4.0)));
  CHECK(std::isfinite(x[4]));
}

TEST_CASE("data: bilinear resize matches torch's interpolate", "[data]") {
  auto img = torch::arange(2 * 5 * 7, torch::kFloat).reshape({1, 2, 5, 7}) / 10;
  for (auto [h, w] : {std::pair{3, 4}, {10, 14}, {5, 7}, {1, 1}}) {
    auto ref = torch::nn::functional::interpolate(img, torch::nn::functional::InterpolateFuncOptions()
                                                           .size(std::vector<int64_t>{h, w})
                                                           .mode(torch::kBilinear)
                                                           .align_corners(false));
    std::vector<float> out(static_cast<size_t>(2 * h * w));
    resize_bilinear(img.data_ptr<float>(), 2, 5, 7, out.data(), h, w);
    auto got = torch::from_blob(out.data(), {1, 2, h, w});
    CHECK(torch::allclose(got, ref, 1e-5, 1e-5));
  }
}

TEST_CASE("cuda: side-stream copies deliver the same batches as the CPU loader", "[cuda]") {
  auto ds = std::make_shared<SyntheticDataset>(512, std::vector<int64_t>{3, 8, 8}, 4, 3);
  LoaderOptions cpu{.batch_size = 32, .shuffle = true, .num_workers = 2, .seed = 4};
  LoaderOptions gpu = cpu;
  gpu.pin_memory = true;
  gpu.device = torch::Device(torch::kCUDA, 0);
  gpu.non_blocking = true;
  gpu.channels_last = true;
  Loader a(ds, cpu), b(ds, gpu);
  for (int epoch = 0; epoch < 2; ++epoch) {
    a.start_epoch(epoch);
    b.start_epoch(epoch);
    while (auto x = a.next()) {
      auto y = b.next();
      REQUIRE(y);
      CHECK(y->x().is_cuda());
      CHECK(y->x().is_contiguous(torch::MemoryFormat::ChannelsLast));
      // Work on the compute stream right away: it must see the finished copy.
      CHECK(torch::equal((y->x() * 2).cpu(), x->x() * 2));
      CHECK(torch::equal(y->y().cpu(), x->y()));
    }
    CHECK_FALSE(b.next());
  }
  CHECK(b.staging_buffers() <= 2 * 2 + 2);
}
