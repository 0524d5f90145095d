// Separable antialiased bilinear resampling, with weights computed once per output row and column.
#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gputrain {
namespace {

// The source pixels and normalized weights of one output position.
struct Taps {
  int64_t first = 0, count = 0;
  const float* w = nullptr;
};

// Per output index: torch's antialiased taps (UpSampleKernel's aa weights: support = scale when
// shrinking, else 1; a triangle filter at (source - center + 0.5) / max(scale, 1); normalized to
// sum 1), over the window [start, start + length) of an axis of `size` pixels.
class AxisTaps {
 public:
  AxisTaps(double start, double length, int64_t size, int64_t out) : taps_(static_cast<size_t>(out)) {
    const auto base = static_cast<int64_t>(std::floor(start));
    const int64_t end = std::min<int64_t>(size, static_cast<int64_t>(std::ceil(start + length - 1e-9)));
    const int64_t in = std::max<int64_t>(1, end - base);  // whole pixels the window touches
    const double frac = start - static_cast<double>(base);
    const double scale = length / static_cast<double>(out);
    const double support = scale >= 1.0 ? scale : 1.0;
    const double inv = scale >= 1.0 ? 1.0 / scale : 1.0;
    const auto span = static_cast<size_t>(std::ceil(support) * 2 + 1);
    weights_.assign(static_cast<size_t>(out) * span, 0.0f);
    std::vector<double> w(span);
    for (int64_t o = 0; o < out; ++o) {
      const double center = frac + scale * (static_cast<double>(o) + 0.5);
      const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
      const int64_t n = std::min<int64_t>(std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in) - lo,
                                          static_cast<int64_t>(span));
      double total = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double x = std::abs((static_cast<double>(j + lo) - center + 0.5) * inv);
        w[static_cast<size_t>(j)] = x < 1.0 ? 1.0 - x : 0.0;
        total += w[static_cast<size_t>(j)];
      }
      float* dst = &weights_[static_cast<size_t>(o) * span];
      for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(total > 0 ? w[static_cast<size_t>(j)] / total : 0.0);
      taps_[static_cast<size_t>(o)] = {base + lo, std::max<int64_t>(n, 0), dst};
    }
  }
  const Taps& operator[](int64_t o) const { return taps_[static_cast<size_t>(o)]; }
  // The source range all outputs read.
  int64_t lowest() const { return taps_.front().first; }
  int64_t highest() const { return taps_.back().first + taps_.back().count; }

 private:
  std::vector<Taps> taps_;
  std::vector<float> weights_;
};

// One image of `channels` interleaved channels (rows `row_stride` elements apart) resampled into
// `channels` CHW planes of out_h x out_w. Vertical pass first, over each output row's whole span
// of source columns (contiguous, so it vectorizes), then the horizontal pass on that one row:
// the costly per-tap work runs on out_h rows instead of every source row.
// Each output channel c is written as value * k[c] + b[c] (the 1/255 scale and a normalization).
template <typename T>
void resample_planes(const T* src, int64_t row_stride, int64_t channels, const AxisTaps& tx, const AxisTaps& ty,
                     int64_t out_h, int64_t out_w, const float* k, const float* b, float* out) {
  const int64_t x_lo = tx.lowest(), span = (tx.highest() - x_lo) * channels, plane = out_h * out_w;
  thread_local std::vector<float> acc;  // per loader thread: no allocation once warm
  acc.resize(static_cast<size_t>(span));
  float* a = acc.data();
  for (int64_t y = 0; y < out_h; ++y) {
    const Taps& ty_ = ty[y];
    std::fill(a, a + span, 0.0f);
    for (int64_t j = 0; j < ty_.count; ++j) {
      const float w = ty_.w[j];
      const T* row = src + (ty_.first + j) * row_stride + x_lo * channels;
      for (int64_t i = 0; i < span; ++i) a[i] += w * static_cast<float>(row[i]);
    }
    float* o = out + y * out_w;
    for (int64_t x = 0; x < out_w; ++x) {
      const Taps& t = tx[x];
      const float* p = a + (t.first - x_lo) * channels;
      if (channels == 3) {
        float v0 = 0, v1 = 0, v2 = 0;
        for (int64_t j = 0; j < t.count; ++j) {
          v0 += t.w[j] * p[j * 3];
          v1 += t.w[j] * p[j * 3 + 1];
          v2 += t.w[j] * p[j * 3 + 2];
        }
        o[x] = v0 * k[0] + b[0];
        o[plane + x] = v1 * k[1] + b[1];
        o[2 * plane + x] = v2 * k[2] + b[2];
      } else {
        for (int64_t c = 0; c < channels; ++c) {
          float v = 0;
          for (int64_t j = 0; j < t.count; ++j) v += t.w[j] * p[j * channels + c];
          o[c * plane + x] = v * k[c] + b[c];
        }
      }
    }
  }
}

}  // namespace

void resample(const Image& img, const Window& win, int64_t out_h, int64_t out_w, float* out,
              const std::vector<float>& mean, const std::vector<float>& std) {
  const AxisTaps tx(win.left, win.width, img.width, out_w), ty(win.top, win.height, img.height, out_h);
  std::vector<float> k(static_cast<size_t>(img.channels), 1.0f / 255.0f), b(static_cast<size_t>(img.channels), 0.0f);
  for (size_t c = 0; c < k.size() && !mean.empty(); ++c) {
    const size_t i = mean.size() == 1 ? 0 : c;  // (v / 255 - mean) / std, in one multiply-add
    k[c] = 1.0f / (255.0f * std[i]);
    b[c] = -mean[i] / std[i];
  }
  resample_planes(img.pixels.data(), img.width * img.channels, img.channels, tx, ty, out_h, out_w, k.data(), b.data(),
                  out);
}

void resample(const float* chw, int64_t channels, int64_t h, int64_t w, const Window& win, int64_t out_h,
              int64_t out_w, float* out) {
  const AxisTaps tx(win.left, win.width, w, out_w), ty(win.top, win.height, h, out_h);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t c = 0; c < channels; ++c)
    resample_planes(chw + c * h * w, w, int64_t{1}, tx, ty, out_h, out_w, &one, &zero, out + c * out_h * out_w);
}

}  // namespace gputrain
