// The Dataset interface: a size and a way to fetch sample i. Behaviour is added by wrapping.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace gputrain {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Shape of one sample, e.g. {1, 28, 28}.
  virtual std::vector<int64_t> sample_shape() const = 0;
  virtual int64_t num_classes() const = 0;
  // Writes sample `index` as float32 into `out` (sample_numel() values) and returns its label.
  // `seed` drives any randomness (augmentation), so a sample is reproducible whatever thread
  // loads it. Must be safe to call from several threads at once.
  virtual int64_t get(int64_t index, float* out, uint64_t seed) const = 0;

  int64_t sample_numel() const {
    int64_t n = 1;
    for (auto d : sample_shape()) n *= d;
    return n;
  }
};

using DatasetPtr = std::shared_ptr<const Dataset>;

// A small, fast, seedable generator (splitmix64) for shuffling and augmentation.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return next() % n; }
};

// Mixes several values into one seed.
inline uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0) {
  Rng r(a ^ (b * 0xD1B54A32D192ED03ull) ^ (c * 0x8CB92BA72F3D8DD7ull));
  return r.next();
}

}  // namespace gputrain
