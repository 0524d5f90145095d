// Per-sample transforms (normalize, random crop, flip, color jitter, log1p), resizing, and the
// wrapper datasets that apply them.
#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "data/resample.h"

namespace gputrain {

ChannelLayout::ChannelLayout(const std::vector<int64_t>& shape) {
  if (shape.empty()) return;
  if (shape.size() <= 2) {  // {F} or {T, F}: per feature
    channels = shape.back();
    for (size_t i = 0; i + 1 < shape.size(); ++i) outer *= shape[i];
  } else {  // {C, ...}: per channel
    channels = shape[0];
    for (size_t i = 1; i < shape.size(); ++i) inner *= shape[i];
  }
}

Normalize::Normalize(std::vector<float> mean, std::vector<float> std) : mean_(std::move(mean)) {
  for (float s : std) inv_std_.push_back(1.0f / s);
}

void Normalize::apply(float* x, const std::vector<int64_t>& shape, Rng&) const {
  ChannelLayout l(shape);
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t c = 0; c < l.channels; ++c) {
      size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(c);
      float m = mean_[k], s = inv_std_[k];
      float* p = x + (o * l.channels + c) * l.inner;
      for (int64_t i = 0; i < l.inner; ++i) p[i] = (p[i] - m) * s;
    }
}

ChannelStats compute_channel_stats(const Dataset& data, int64_t max_samples) {
  const auto shape = data.sample_shape();
  ChannelLayout l(shape);
  const int64_t n = data.size(), take = std::min(n, max_samples);
  std::vector<double> sum(static_cast<size_t>(l.channels)), sq(static_cast<size_t>(l.channels));
  std::vector<float> x(static_cast<size_t>(data.sample_numel()));
  std::vector<float> target(static_cast<size_t>(std::max<int64_t>(1, data.target_numel())));
  for (int64_t k = 0; k < take; ++k) {
    data.get(k * n / take, x.data(), target.data(), 0);  // evenly spaced over the whole set
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t c = 0; c < l.channels; ++c) {
        const float* p = x.data() + (o * l.channels + c) * l.inner;
        double s = 0, q = 0;
        for (int64_t i = 0; i < l.inner; ++i) {
          s += p[i];
          q += static_cast<double>(p[i]) * p[i];
        }
        sum[static_cast<size_t>(c)] += s;
        sq[static_cast<size_t>(c)] += q;
      }
  }
  ChannelStats st;
  const double count = static_cast<double>(std::max<int64_t>(1, take * l.outer * l.inner));
  for (int64_t c = 0; c < l.channels; ++c) {
    double mean = sum[static_cast<size_t>(c)] / count;
    double var = std::max(0.0, sq[static_cast<size_t>(c)] / count - mean * mean);
    st.mean.push_back(static_cast<float>(mean));
    // A constant channel would divide by zero: leave its scale alone.
    st.std.push_back(var > 1e-12 ? static_cast<float>(std::sqrt(var)) : 1.0f);
  }
  return st;
}

void RandomResizedCrop::apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const {
  const int64_t C = shape[0], H = shape[1], W = shape[2];
  const CropBox b = random_resized_crop_box(H, W, range_, rng);
  thread_local std::vector<float> tmp;
  tmp.assign(x, x + C * H * W);
  resample(tmp.data(), C, H, W,
           {static_cast<double>(b.top), static_cast<double>(b.left), static_cast<double>(b.height),
            static_cast<double>(b.width)},
           H, W, x);
}

void RandomErasing::apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const {
  if (rng.uniform() >= prob_) return;
  const int64_t C = shape[0], H = shape[1], W = shape[2];
  const double area = static_cast<double>(H * W), log_lo = std::log(0.3), log_hi = std::log(1 / 0.3);
  const auto normal = [&] {  // Box-Muller
    const double u1 = 1.0 - static_cast<double>(rng.uniform()), u2 = rng.uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  };
  // timm: 1 to --recount boxes, sharing the area between them.
  const int64_t count = count_ == 1 ? 1 : 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(count_)));
  for (int64_t n = 0; n < count; ++n)
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target = (0.02 + (1.0 / 3.0 - 0.02) * rng.uniform()) * area / static_cast<double>(count);
      const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
      const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
      const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
      if (w >= W || h >= H) continue;
      const auto top = static_cast<int64_t>(rng.below(static_cast<uint64_t>(H - h + 1)));
      const auto left = static_cast<int64_t>(rng.below(static_cast<uint64_t>(W - w + 1)));
      for (int64_t c = 0; c < C; ++c) {
        const float channel_value = mode_ == "rand" ? normal() : 0.0f;
        for (int64_t y = top; y < top + h; ++y)
          for (int64_t k = left; k < left + w; ++k) x[(c * H + y) * W + k] = mode_ == "pixel" ? normal() : channel_value;
      }
      break;
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
      // The valid span is contiguous: copy it, zero the rest.
      int64_t lo = std::clamp<int64_t>(-dx, 0, W), hi = std::clamp<int64_t>(W - dx, 0, W);
      std::fill(row, row + lo, 0.0f);
      if (hi > lo) std::memcpy(row + lo, src + lo + dx, static_cast<size_t>(hi - lo) * sizeof(float));
      std::fill(row + std::max(lo, hi), row + W, 0.0f);
    }
  }
}

void HorizontalFlip::apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const {
  if (rng.next() & 1) return;
  const int64_t rows = shape[0] * shape[1], W = shape[2];
  for (int64_t r = 0; r < rows; ++r) std::reverse(x + r * W, x + (r + 1) * W);
}

namespace {

void clamp01(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = std::clamp(p[i], 0.0f, 1.0f);
}

// Shifts the hue of one RGB pixel by `shift` turns (through HSV, as torchvision does).
void shift_hue(float& r, float& g, float& b, float shift) {
  float mx = std::max({r, g, b}), mn = std::min({r, g, b}), d = mx - mn;
  if (d <= 0) return;  // gray: no hue
  float h = mx == r ? (g - b) / d : mx == g ? 2.0f + (b - r) / d : 4.0f + (r - g) / d;
  h = h / 6.0f + shift;
  h -= std::floor(h);
  float s = d / mx, v = mx, f = h * 6.0f;
  int i = static_cast<int>(f) % 6;
  float fr = f - std::floor(f), p = v * (1 - s), q = v * (1 - s * fr), t = v * (1 - s * (1 - fr));
  switch (i) {
    case 0:
      r = v, g = t, b = p;
      break;
    case 1:
      r = q, g = v, b = p;
      break;
    case 2:
      r = p, g = v, b = t;
      break;
    case 3:
      r = p, g = q, b = v;
      break;
    case 4:
      r = t, g = p, b = v;
      break;
    default:
      r = v, g = p, b = q;
      break;
  }
}

}  // namespace

void ColorJitter::apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const {
  const int64_t C = shape[0], plane = shape[1] * shape[2], n = C * plane;
  const bool rgb = C == 3;
  auto gray = [&](int64_t i) { return rgb ? 0.299f * x[i] + 0.587f * x[plane + i] + 0.114f * x[2 * plane + i] : x[i]; };
  // Factors are drawn even when unused, so one sample's randomness does not depend on the others.
  float fb = rng.uniform(std::max(0.0f, 1 - b_), 1 + b_), fc = rng.uniform(std::max(0.0f, 1 - c_), 1 + c_);
  float fs = rng.uniform(std::max(0.0f, 1 - s_), 1 + s_), fh = rng.uniform(-h_, h_);
  if (b_ > 0) {
    for (int64_t i = 0; i < n; ++i) x[i] *= fb;
    clamp01(x, n);
  }
  if (c_ > 0) {
    double m = 0;
    for (int64_t i = 0; i < plane; ++i) m += gray(i);
    float mean = static_cast<float>(m / static_cast<double>(plane));
    for (int64_t i = 0; i < n; ++i) x[i] = (x[i] - mean) * fc + mean;
    clamp01(x, n);
  }
  if (!rgb) return;
  if (s_ > 0) {
    for (int64_t i = 0; i < plane; ++i) {
      float g = gray(i);
      for (int64_t c = 0; c < 3; ++c) x[c * plane + i] = (x[c * plane + i] - g) * fs + g;
    }
    clamp01(x, n);
  }
  if (h_ > 0)
    for (int64_t i = 0; i < plane; ++i) shift_hue(x[i], x[plane + i], x[2 * plane + i], fh);
}

void Log1p::apply(float* x, const std::vector<int64_t>& shape, Rng&) const {
  const int64_t n = Dataset::numel(shape);
  for (int64_t i = 0; i < n; ++i) x[i] = std::copysign(std::log1p(std::fabs(x[i])), x[i]);
}

TransformedDataset::TransformedDataset(DatasetPtr base, std::vector<std::shared_ptr<const Transform>> transforms)
    : DatasetWrapper(std::move(base)), transforms_(std::move(transforms)), shape_(base_->sample_shape()) {}

int64_t TransformedDataset::get(int64_t index, float* out, float* target, uint64_t seed) const {
  int64_t label = base_->get(index, out, target, seed);
  Rng rng(mix_seed(seed, 0x7a));
  for (const auto& t : transforms_) t->apply(out, shape_, rng);
  return label;
}

void resize_bilinear(const float* in, int64_t channels, int64_t h, int64_t w, float* out, int64_t out_h,
                     int64_t out_w) {
  const float sy = static_cast<float>(h) / static_cast<float>(out_h),
              sx = static_cast<float>(w) / static_cast<float>(out_w);
  for (int64_t y = 0; y < out_h; ++y) {
    float fy = std::max(0.0f, (static_cast<float>(y) + 0.5f) * sy - 0.5f);
    int64_t y0 = std::min<int64_t>(static_cast<int64_t>(fy), h - 1), y1 = std::min<int64_t>(y0 + 1, h - 1);
    float wy = fy - static_cast<float>(y0);
    for (int64_t x = 0; x < out_w; ++x) {
      float fx = std::max(0.0f, (static_cast<float>(x) + 0.5f) * sx - 0.5f);
      int64_t x0 = std::min<int64_t>(static_cast<int64_t>(fx), w - 1), x1 = std::min<int64_t>(x0 + 1, w - 1);
      float wx = fx - static_cast<float>(x0);
      for (int64_t c = 0; c < channels; ++c) {
        const float* p = in + c * h * w;
        float top = p[y0 * w + x0] * (1 - wx) + p[y0 * w + x1] * wx;
        float bottom = p[y1 * w + x0] * (1 - wx) + p[y1 * w + x1] * wx;
        out[(c * out_h + y) * out_w + x] = top * (1 - wy) + bottom * wy;
      }
    }
  }
}

ResizedDataset::ResizedDataset(DatasetPtr base, int64_t out_h, int64_t out_w)
    : DatasetWrapper(std::move(base)), in_shape_(base_->sample_shape()) {
  shape_ = {in_shape_[0], out_h, out_w};
}

int64_t ResizedDataset::get(int64_t index, float* x, float* target, uint64_t seed) const {
  thread_local std::vector<float> full;
  full.resize(static_cast<size_t>(Dataset::numel(in_shape_)));
  int64_t label = base_->get(index, full.data(), target, seed);
  resize_bilinear(full.data(), in_shape_[0], in_shape_[1], in_shape_[2], x, shape_[1], shape_[2]);
  return label;
}

}  // namespace gputrain
