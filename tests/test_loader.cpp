// The Loader: coverage, order independent of worker count, seeded shuffles, clean shutdown.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "data/loader.h"
#include "data/synthetic.h"
#include "data/transforms.h"

using namespace gputrain;

namespace {

// Sample i is the value i (one float), label i % 3; optionally slow, optionally failing.
class Counting : public Dataset {
 public:
  Counting(int64_t n, int sleep_us = 0, int64_t fail_at = -1) : n_(n), sleep_us_(sleep_us), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return {1, 1, 1}; }
  int64_t num_classes() const override { return 3; }
  int64_t get(int64_t i, float* out, float*, uint64_t) const override {
    if (sleep_us_) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    if (i == fail_at_) throw std::runtime_error("sample " + std::to_string(i) + " is broken");
    out[0] = static_cast<float>(i);
    return i % 3;
  }

 private:
  int64_t n_;
  int sleep_us_;
  int64_t fail_at_;
};

std::vector<int64_t> drain(Loader& loader, int64_t epoch) {
  std::vector<int64_t> seen;
  loader.start_epoch(epoch);
  while (auto b = loader.next()) {
    auto x = b->x().flatten();
    auto y = b->y();
    for (int64_t j = 0; j < x.size(0); ++j) {
      int64_t v = static_cast<int64_t>(x[j].item<float>());
      CHECK(y[j].item<int64_t>() == v % 3);
      seen.push_back(v);
    }
  }
  return seen;
}

}  // namespace

TEST_CASE("loader: every sample exactly once per epoch", "[loader]") {
  auto ds = std::make_shared<Counting>(103);
  for (int workers : {0, 1, 4}) {
    Loader loader(ds, {.batch_size = 10, .shuffle = true, .drop_last = false, .num_workers = workers, .seed = 7});
    CHECK(loader.num_batches() == 11);
    auto seen = drain(loader, 0);
    CHECK(seen.size() == 103);
    CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 103);
  }
}

TEST_CASE("loader: the same order for 0, 1 and 4 workers, a new order each epoch", "[loader]") {
  auto ds = std::make_shared<Counting>(200, 20);
  std::vector<std::vector<int64_t>> orders;
  for (int workers : {0, 1, 4}) {
    Loader loader(ds, {.batch_size = 16,
                       .shuffle = true,
                       .drop_last = true,
                       .num_workers = workers,
                       .prefetch_factor = 2,
                       .seed = 11});
    orders.push_back(drain(loader, 3));
    CHECK(drain(loader, 4) != orders.back());  // reshuffled per epoch
  }
  CHECK(orders[0].size() == 192);  // drop_last: 12 full batches of 16
  CHECK(orders[0] == orders[1]);
  CHECK(orders[0] == orders[2]);
  auto planned = Loader(ds, {.batch_size = 16, .shuffle = true, .drop_last = true, .seed = 11}).epoch_order(3);
  CHECK(std::vector<int64_t>(planned.begin(), planned.begin() + 192) == orders[0]);
  Loader other_seed(ds, {.batch_size = 16, .shuffle = true, .drop_last = true, .seed = 12});
  CHECK(drain(other_seed, 3) != orders[0]);
}

TEST_CASE("loader: without shuffle, samples come in index order", "[loader]") {
  Loader loader(std::make_shared<Counting>(25), {.batch_size = 4, .num_workers = 2});
  auto seen = drain(loader, 0);
  REQUIRE(seen.size() == 25);
  for (int64_t i = 0; i < 25; ++i) CHECK(seen[static_cast<size_t>(i)] == i);
}

TEST_CASE("loader: clean shutdown mid-epoch, and restarting an epoch midway", "[loader]") {
  auto ds = std::make_shared<Counting>(10000, 50);
  auto t0 = std::chrono::steady_clock::now();
  {
    Loader loader(ds, {.batch_size = 8, .shuffle = true, .num_workers = 4, .prefetch_factor = 4, .seed = 1});
    loader.start_epoch(0);
    REQUIRE(loader.next());
    REQUIRE(loader.next());
    loader.start_epoch(1);  // abandon epoch 0 halfway: its in-flight batches must be dropped
    auto b = loader.next();
    REQUIRE(b);
    CHECK(static_cast<int64_t>(b->x().flatten()[0].item<float>()) == loader.epoch_order(1)[0]);
  }  // destructor joins the workers while they are busy
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("loader: non-persistent workers restart each epoch", "[loader]") {
  auto ds = std::make_shared<Counting>(50);
  Loader loader(ds, {.batch_size = 5, .shuffle = true, .num_workers = 2, .persistent_workers = false, .seed = 3});
  auto a = drain(loader, 0);
  auto b = drain(loader, 0);
  CHECK(a == b);
  CHECK(a.size() == 50);
}

TEST_CASE("loader: a worker's error reaches the consumer", "[loader]") {
  Loader loader(std::make_shared<Counting>(40, 0, 17), {.batch_size = 4, .num_workers = 2});
  loader.start_epoch(0);
  CHECK_THROWS_WITH(
      [&] {
        while (loader.next()) {}
      }(),
      Catch::Contains("sample 17 is broken"));
}

TEST_CASE("transforms: seeded augmentation is reproducible whatever the worker count", "[loader]") {
  auto base = std::make_shared<SyntheticDataset>(64, std::vector<int64_t>{2, 8, 8}, 4, 5);
  std::vector<std::shared_ptr<const Transform>> t = {
      std::make_shared<RandomCrop>(2), std::make_shared<HorizontalFlip>(),
      std::make_shared<Normalize>(std::vector<float>{0.5f}, std::vector<float>{0.2f})};
  auto ds = std::make_shared<TransformedDataset>(base, t);
  auto batches = [&](int workers) {
    Loader loader(ds, {.batch_size = 16, .shuffle = true, .num_workers = workers, .seed = 9});
    loader.start_epoch(2);
    std::vector<torch::Tensor> xs;
    while (auto b = loader.next()) xs.push_back(b->x());
    return torch::cat(xs);
  };
  auto a = batches(0), b = batches(3);
  CHECK(torch::equal(a, b));
  // The augmentation really changes samples: some differ from the un-augmented normalized ones.
  Loader plain(std::make_shared<TransformedDataset>(base, std::vector<std::shared_ptr<const Transform>>{t[2]}),
               {.batch_size = 16, .shuffle = true, .seed = 9});
  plain.start_epoch(2);
  std::vector<torch::Tensor> xs;
  while (auto p = plain.next()) xs.push_back(p->x());
  CHECK_FALSE(torch::equal(a, torch::cat(xs)));
}

TEST_CASE("transforms: flip mirrors rows and crop shifts with zero padding", "[loader]") {
  std::vector<int64_t> shape{1, 2, 3};
  float x[6] = {1, 2, 3, 4, 5, 6};
  // Find seeds that flip and that do not, to check both outcomes deterministically.
  int flipped = 0, kept = 0;
  for (uint64_t s = 0; s < 16; ++s) {
    float y[6];
    std::copy(x, x + 6, y);
    Rng rng(s);
    HorizontalFlip().apply(y, shape, rng);
    if (y[0] == 3) {
      CHECK(std::vector<float>(y, y + 6) == std::vector<float>{3, 2, 1, 6, 5, 4});
      ++flipped;
    } else {
      CHECK(std::vector<float>(y, y + 6) == std::vector<float>(x, x + 6));
      ++kept;
    }
  }
  CHECK(flipped > 0);
  CHECK(kept > 0);
  for (uint64_t s = 0; s < 32; ++s) {
    float y[6];
    std::copy(x, x + 6, y);
    Rng rng(s);
    RandomCrop(1).apply(y, shape, rng);
    float sum = 0;
    for (float v : y) {
      CHECK((v == 0 || (v >= 1 && v <= 6)));
      sum += v;
    }
    CHECK(sum <= 21);
  }
}
