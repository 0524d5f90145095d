// Dataset wrappers that select samples: a subset by index list, and a seeded train/validation split.
#pragma once
#include <vector>

#include "data/dataset.h"

namespace gputrain {

// The samples of `base` at `indices`, in that order.
class SubsetDataset : public DatasetWrapper {
 public:
  SubsetDataset(DatasetPtr base, std::vector<int64_t> indices)
      : DatasetWrapper(std::move(base)), indices_(std::move(indices)) {}
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override {
    return base_->get(indices_[static_cast<size_t>(index)], x, target, seed);
  }
  void get_fields(int64_t index, FieldWriter& out, uint64_t seed) const override {
    base_->get_fields(indices_[static_cast<size_t>(index)], out, seed);
  }
  int64_t sample_length(int64_t index) const override { return base_->sample_length(indices_[static_cast<size_t>(index)]); }
  // The base's stream with the samples outside the subset left out.
  std::vector<int64_t> stream_order(uint64_t seed, int64_t epoch, bool shuffle) const override;

 private:
  std::vector<int64_t> indices_;
};

// Holds out round(fraction * size) samples, chosen by a seeded shuffle, as the validation split.
// Returns {train, validation}; both are empty-free (at least one sample each) or it throws. The
// validation part reads `eval_view` when given: the same samples without training augmentation.
std::pair<DatasetPtr, DatasetPtr> split_validation(DatasetPtr data, double fraction, uint64_t seed,
                                                   DatasetPtr eval_view = nullptr);

}  // namespace gputrain
