// A synthetic image dataset for benchmarks and tests: random but learnable, needs no files.
#pragma once
#include "data/dataset.h"

namespace gputrain {

// Each class has a fixed random pattern; a sample is its class pattern plus per-sample noise,
// so a model can learn it (the loss falls) and every value derives from (seed, index).
class SyntheticDataset : public Dataset {
 public:
  // Sample i is generated as global sample `first + i`: splits with disjoint ranges never overlap.
  SyntheticDataset(int64_t size, std::vector<int64_t> shape, int64_t num_classes, uint64_t seed, int64_t first = 0);

  int64_t size() const override { return size_; }
  std::vector<int64_t> sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return classes_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;

 private:
  int64_t size_, classes_, first_, numel_;
  std::vector<int64_t> shape_;
  uint64_t seed_;
};

}  // namespace gputrain
