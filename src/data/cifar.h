// CIFAR-10 and CIFAR-100 datasets from the official binary batch files.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace gputrain {

// All images of one split, kept as the file's uint8 channel planes (3x32x32 per record).
class CifarDataset : public Dataset {
 public:
  static constexpr int64_t kImageBytes = 3 * 32 * 32;

  // `pixels` holds labels.size() records of kImageBytes each; labels are already range-checked.
  CifarDataset(std::vector<uint8_t> pixels, std::vector<uint8_t> labels, int64_t classes);

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  std::vector<int64_t> sample_shape() const override { return {3, 32, 32}; }
  int64_t num_classes() const override { return classes_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;

 private:
  std::vector<uint8_t> pixels_, labels_;
  int64_t classes_;
};

// Loads the train or test split of CIFAR-`classes` (10 or 100) from `dir`, or from the folder
// the official tarball unpacks to inside it ("cifar-10-batches-bin" / "cifar-100-binary").
// CIFAR-10: data_batch_1..5.bin (train, all five required), test_batch.bin (test).
// CIFAR-100: train.bin / test.bin, using the fine label.
// Throws a usage error (exit 2) naming the file for missing, truncated or mislabelled files.
// `given` (--num_classes, 0 = `classes`) sets the class count the labels must index.
std::shared_ptr<CifarDataset> load_cifar_split(const std::string& dir, int classes, bool train, int64_t given = 0);

}  // namespace gputrain
