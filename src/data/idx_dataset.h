// MNIST-family datasets from IDX image and label files.
#pragma once
#include <string>

#include "data/dataset.h"
#include "data/idx.h"

namespace gputrain {

class IdxDataset : public Dataset {
 public:
  // Checks that the two arrays belong together (`where` names the files for messages) and that
  // every label is below `classes` (the MNIST family's 10, or --num_classes).
  IdxDataset(IdxArray images, IdxArray labels, const std::string& where, int64_t classes = 10);

  int64_t size() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return classes_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;

 private:
  IdxArray images_, labels_;
  int64_t n_ = 0, numel_ = 0, classes_ = 0;
  std::vector<int64_t> shape_;
};

// Loads `<prefix>-images-idx3-ubyte[.gz]` and `<prefix>-labels-idx1-ubyte[.gz]` from `dir`
// (prefix "train" or "t10k"). Throws a usage error with an install hint when files are missing.
std::shared_ptr<IdxDataset> load_idx_split(const std::string& dir, const std::string& prefix,
                                           const std::string& dataset_name, int64_t classes = 10);

}  // namespace gputrain
