// Per-sample transforms (normalize, random crop, flip) and the wrapper dataset that applies them.
#include "data/transforms.h"

#include <algorithm>
#include <cstring>

namespace gputrain {

Normalize::Normalize(std::vector<float> mean, std::vector<float> std) : mean_(std::move(mean)) {
  for (float s : std) inv_std_.push_back(1.0f / s);
}

void Normalize::apply(float* x, const std::vector<int64_t>& shape, Rng&) const {
  int64_t plane = shape[1] * shape[2];
  for (int64_t c = 0; c < shape[0]; ++c) {
    size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(c);
    float m = mean_[k], s = inv_std_[k];
    float* p = x + c * plane;
    for (int64_t i = 0; i < plane; ++i) p[i] = (p[i] - m) * s;
  }
}

void RandomCrop::apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const {
  const int64_t C = shape[0], H = shape[1], W = shape[2], pad = padding_;
  // Offset of the crop window inside the padded image, in [-pad, pad] relative to the original.
  int64_t dy = static_cast<int64_t>(rng.below(2 * pad + 1)) - pad;
  int64_t dx = static_cast<int64_t>(rng.below(2 * pad + 1)) - pad;
  if (dy == 0 && dx == 0) return;
  thread_local std::vector<float> tmp;
  tmp.assign(x, x + C * H * W);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t y = 0; y < H; ++y) {
      float* row = x + (c * H + y) * W;
      int64_t sy = y + dy;
      if (sy < 0 || sy >= H) {
        std::fill(row, row + W, 0.0f);
        continue;
      }
      const float* src = tmp.data() + (c * H + sy) * W;
      for (int64_t xx = 0; xx < W; ++xx) {
        int64_t sx = xx + dx;
        row[xx] = (sx < 0 || sx >= W) ? 0.0f : src[sx];
      }
    }
  }
}

void HorizontalFlip::apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const {
  if (rng.next() & 1) return;
  const int64_t rows = shape[0] * shape[1], W = shape[2];
  for (int64_t r = 0; r < rows; ++r) std::reverse(x + r * W, x + (r + 1) * W);
}

TransformedDataset::TransformedDataset(DatasetPtr base,
                                       std::vector<std::shared_ptr<const Transform>> transforms)
    : base_(std::move(base)), transforms_(std::move(transforms)), shape_(base_->sample_shape()) {}

int64_t TransformedDataset::get(int64_t index, float* out, float* target, uint64_t seed) const {
  int64_t label = base_->get(index, out, target, seed);
  Rng rng(mix_seed(seed, 0x7a));
  for (const auto& t : transforms_) t->apply(out, shape_, rng);
  return label;
}

}  // namespace gputrain
