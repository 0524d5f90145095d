// Per-sample transforms (normalize, random crop, flip) and the wrapper dataset that applies them.
#pragma once
#include <memory>
#include <vector>

#include "data/dataset.h"

namespace gputrain {

class Transform {
 public:
  virtual ~Transform() = default;
  // Transforms one CxHxW float sample in place.
  virtual void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const = 0;
};

// (x - mean[c]) / std[c]; a single mean/std applies to every channel.
class Normalize : public Transform {
 public:
  Normalize(std::vector<float> mean, std::vector<float> std);
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;

 private:
  std::vector<float> mean_, inv_std_;
};

// Pads with zeros by `padding` pixels on each side and crops back to HxW at a random offset.
class RandomCrop : public Transform {
 public:
  explicit RandomCrop(int64_t padding) : padding_(padding) {}
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;

 private:
  int64_t padding_;
};

// Mirrors the image left-right with probability 1/2.
class HorizontalFlip : public Transform {
 public:
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;
};

// Applies transforms after the base dataset's get(), seeded by the sample's seed.
class TransformedDataset : public Dataset {
 public:
  TransformedDataset(DatasetPtr base, std::vector<std::shared_ptr<const Transform>> transforms);
  int64_t size() const override { return base_->size(); }
  std::vector<int64_t> sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return base_->num_classes(); }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;

 private:
  DatasetPtr base_;
  std::vector<std::shared_ptr<const Transform>> transforms_;
  std::vector<int64_t> shape_;
};

}  // namespace gputrain
