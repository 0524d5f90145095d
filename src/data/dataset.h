// The Dataset interface: a size and a way to fetch sample i. Behaviour is added by wrapping.
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gputrain {

struct SampleSchema;

// Where a named-field dataset writes one sample (Dataset::get_fields): field `f` of its schema
// takes `length` rows along its varying size, or its fixed shape when it does not vary, in the
// field's dtype (int64_t for i64, float for f32).
class FieldWriter {
 public:
  virtual ~FieldWriter() = default;
  virtual void* field(size_t f, int64_t length = 0) = 0;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Shape of one sample, e.g. {1, 28, 28} for an image, {T, F} for a sequence, {F} for a table row.
  virtual std::vector<int64_t> sample_shape() const = 0;
  // Classification: the number of classes. Regression: 0, and targets are floats.
  virtual int64_t num_classes() const = 0;
  // Regression only: the shape of one sample's float target, e.g. {3} for yaw/pitch/roll.
  virtual std::vector<int64_t> target_shape() const { return {}; }
  // Writes sample `index` as float32 into `x` (sample_numel() values). Classification: returns
  // the label (`target` is unused). Regression: writes target_numel() floats into `target` and
  // returns 0. `seed` drives any randomness (augmentation), so a sample is reproducible whatever
  // thread loads it. Must be safe to call from several threads at once. Throws gputrain::Error
  // (usage, exit 2) for bad input, naming the file.
  virtual int64_t get(int64_t index, float* x, float* target, uint64_t seed) const = 0;

  // A dataset of named fields beyond x and y (text: ids, masks, per-token labels) declares them
  // here (data/schema.h) and writes its samples with get_fields; get() and the shapes above then
  // describe its target alone (num_classes, target_shape). Null for an x/y dataset.
  virtual std::shared_ptr<const SampleSchema> named_fields() const { return nullptr; }
  virtual void get_fields(int64_t /*index*/, FieldWriter& /*out*/, uint64_t /*seed*/) const {
    throw std::logic_error("get_fields on a dataset without named fields");
  }

  // Unreadable samples skipped so far (--skip_bad_samples), for the run summary.
  virtual int64_t bad_samples() const { return 0; }

  // A dataset stored as a stream (tar shards) gives an epoch's order of all its samples itself,
  // a pure function of its arguments (webdataset.h); empty = the loader's uniform shuffle.
  virtual std::vector<int64_t> stream_order(uint64_t /*seed*/, int64_t /*epoch*/, bool /*shuffle*/) const {
    return {};
  }

  // Classification with several labels per sample, each 0 or 1: num_classes() labels, float
  // targets, a binary cross-entropy each (text multi-label).
  virtual bool multilabel() const { return false; }

  // Classification: the names of the classes (multi-label: of the labels) in id order, where the
  // data has them (a CSV's label column, an image folder's subfolders, texts' labels); else null.
  virtual const std::vector<std::string>* label_names() const { return nullptr; }

  // The tokens of sample `index` (what its batch is padded to), for length bucketing; -1 when
  // the dataset does not know them without reading the sample.
  virtual int64_t sample_length(int64_t /*index*/) const { return -1; }

  bool is_regression() const { return num_classes() == 0; }
  int64_t sample_numel() const { return numel(sample_shape()); }
  int64_t target_numel() const { return is_regression() ? numel(target_shape()) : 0; }
  static int64_t numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

using DatasetPtr = std::shared_ptr<const Dataset>;

// Base of the wrappers (transforms, subsets, caching): forwards everything to the wrapped
// dataset, so each wrapper overrides only what it changes.
class DatasetWrapper : public Dataset {
 public:
  explicit DatasetWrapper(DatasetPtr base) : base_(std::move(base)) {}
  int64_t size() const override { return base_->size(); }
  std::vector<int64_t> sample_shape() const override { return base_->sample_shape(); }
  int64_t num_classes() const override { return base_->num_classes(); }
  std::vector<int64_t> target_shape() const override { return base_->target_shape(); }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override {
    return base_->get(index, x, target, seed);
  }
  std::shared_ptr<const SampleSchema> named_fields() const override { return base_->named_fields(); }
  void get_fields(int64_t index, FieldWriter& out, uint64_t seed) const override {
    base_->get_fields(index, out, seed);
  }
  int64_t bad_samples() const override { return base_->bad_samples(); }
  bool multilabel() const override { return base_->multilabel(); }
  const std::vector<std::string>* label_names() const override { return base_->label_names(); }
  int64_t sample_length(int64_t index) const override { return base_->sample_length(index); }
  std::vector<int64_t> stream_order(uint64_t seed, int64_t epoch, bool shuffle) const override {
    return base_->stream_order(seed, epoch, shuffle);
  }

 protected:
  DatasetPtr base_;
};

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
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return next() % n; }
};

// Mixes several values into one seed.
inline uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0) {
  Rng r(a ^ (b * 0xD1B54A32D192ED03ull) ^ (c * 0x8CB92BA72F3D8DD7ull));
  return r.next();
}

}  // namespace gputrain
