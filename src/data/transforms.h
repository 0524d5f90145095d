// Per-sample transforms (normalize, random crop, flip, color jitter, log1p), resizing, and the
// wrapper datasets that apply them.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/crop_box.h"
#include "data/dataset.h"

namespace gputrain {

class Transform {
 public:
  virtual ~Transform() = default;
  // Transforms one sample of `shape` in place.
  virtual void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const = 0;
};

// Which axis holds the channels that normalization works per: dimension 0 for images and
// volumes (C x ...), the last one (features) for table rows {F} and sequences {T, F}.
struct ChannelLayout {
  int64_t outer = 1, channels = 1, inner = 1;  // element = (o * channels + c) * inner + i
  explicit ChannelLayout(const std::vector<int64_t>& shape);
};

// (x - mean[c]) / std[c] per channel; a single mean/std applies to every channel.
class Normalize : public Transform {
 public:
  Normalize(std::vector<float> mean, std::vector<float> std);
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;

 private:
  std::vector<float> mean_, inv_std_;
};

// Per-channel mean and std of a dataset (over at most `max_samples` evenly spaced samples).
struct ChannelStats {
  std::vector<float> mean, std;
};
ChannelStats compute_channel_stats(const Dataset& data, int64_t max_samples = 10000);

// Pads with zeros by `padding` pixels on each side and crops back to HxW at a random offset.
class RandomCrop : public Transform {
 public:
  explicit RandomCrop(int64_t padding) : padding_(padding) {}
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;

 private:
  int64_t padding_;
};

// torchvision's RandomResizedCrop on a float image: a random box (crop_box.h) resized back to
// the image's size, antialiased. An image folder does this while decoding instead.
class RandomResizedCrop : public Transform {
 public:
  explicit RandomResizedCrop(RrcRange range) : range_(range) {}
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;

 private:
  RrcRange range_;
};

// timm's RandomErasing: with probability `prob`, 1 to `count` boxes of 2% to 1/3 of the area (split
// between them) and aspect 0.3 to 3.3 (log-uniform), 10 tries each, filled with zeros (const),
// one normal value per channel (rand) or normal noise (pixel).
class RandomErasing : public Transform {
 public:
  RandomErasing(double prob, std::string mode, int64_t count) : prob_(prob), mode_(std::move(mode)), count_(count) {}
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;

 private:
  double prob_;
  std::string mode_;
  int64_t count_;
};

// Mirrors the image left-right with probability 1/2.
class HorizontalFlip : public Transform {
 public:
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;
};

// Random brightness, contrast, saturation and hue changes of an image in [0, 1] (each factor
// drawn uniformly as torchvision's ColorJitter does; applied in that fixed order). Saturation
// and hue need 3 channels and are skipped for grayscale.
class ColorJitter : public Transform {
 public:
  ColorJitter(float brightness, float contrast, float saturation, float hue)
      : b_(brightness), c_(contrast), s_(saturation), h_(hue) {}
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;

 private:
  float b_, c_, s_, h_;
};

// sign(x) * log(1 + |x|): compresses count data; defined for every value, so it cannot make NaNs.
class Log1p : public Transform {
 public:
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;
};

// Applies transforms after the base dataset's get(), seeded by the sample's seed.
class TransformedDataset : public DatasetWrapper {
 public:
  TransformedDataset(DatasetPtr base, std::vector<std::shared_ptr<const Transform>> transforms);
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;

 private:
  std::vector<std::shared_ptr<const Transform>> transforms_;
  std::vector<int64_t> shape_;
};

// Bilinear resize of a C x H x W float image (align_corners = false, as torch's interpolate).
void resize_bilinear(const float* in, int64_t channels, int64_t h, int64_t w, float* out, int64_t out_h, int64_t out_w);

// Resizes every image sample of the base dataset to out_h x out_w.
class ResizedDataset : public DatasetWrapper {
 public:
  ResizedDataset(DatasetPtr base, int64_t out_h, int64_t out_w);
  std::vector<int64_t> sample_shape() const override { return shape_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;

 private:
  std::vector<int64_t> in_shape_, shape_;
};

}  // namespace gputrain
