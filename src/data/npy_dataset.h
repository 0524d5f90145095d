// Datasets from NumPy arrays: an x array (N, ...) and a y array of labels or regression targets.
#pragma once
#include <string>

#include "data/dataset.h"
#include "data/npy.h"

namespace gputrain {

// Samples are read straight from the arrays' storage. For .npy files and np.savez (stored)
// archives that storage is a memory mapping, so even a 10 GB file opens instantly and the
// operating system pages data in as batches touch it (and shares those pages between loader
// threads); only np.savez_compressed members are inflated into memory at load time.
class NpyDataset : public Dataset {
 public:
  // `task`: "classification" (y: 1-D class indices, see check_class_indices; `classes` is
  // --num_classes, 0 = inferred), "regression" (y: (N) or (N, ...), any numeric dtype) or
  // "auto" (rank-1 integer or bool y is classification, anything else regression). Float
  // features and targets must be finite. Throws a usage error naming the arrays when they do
  // not fit.
  NpyDataset(NpyArray x, NpyArray y, const std::string& task, int64_t classes = 0);

  int64_t size() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return sample_shape_; }
  int64_t num_classes() const override { return classes_; }
  std::vector<int64_t> target_shape() const override { return target_shape_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;

  const NpyArray& x() const { return x_; }
  const NpyArray& y() const { return y_; }

 private:
  NpyArray x_, y_;
  int64_t n_ = 0, x_numel_ = 0, y_numel_ = 0, classes_ = 0;
  std::vector<int64_t> sample_shape_, target_shape_;
};

// Loads a dataset from NumPy files.
// - x_path ending in .npz: y_path must be empty; the archive's "x_<split>"/"y_<split>" arrays
//   (Keras style, e.g. mnist.npz: x_train, y_train, x_test, y_test) are used, or else "x"/"y".
// - x_path ending in .npy: y_path (an .npy of the same length) is required.
// Errors (usage, exit 2) name the file and list the keys an archive holds when one is missing.
std::shared_ptr<NpyDataset> load_npy_dataset(const std::string& x_path, const std::string& y_path,
                                             const std::string& split, const std::string& task, int64_t classes = 0);

// Whether the .npz archive holds both "x_<split>" and "y_<split>" (reads only its directory).
bool npz_has_split(const std::string& path, const std::string& split);

}  // namespace gputrain
