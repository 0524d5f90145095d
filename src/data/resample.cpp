// Separable antialiased bilinear resampling: horizontal pass over the rows the vertical taps
// need, then the vertical pass, with weights computed once per output row and column.
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

// Reads pixel (y, x, c) of either layout as a float.
struct HwcBytes {
  const uint8_t* p;
  int64_t w, c;
  float at(int64_t y, int64_t x, int64_t ch) const { return p[(y * w + x) * c + ch]; }
};
struct ChwFloats {
  const float* p;
  int64_t h, w;
  float at(int64_t y, int64_t x, int64_t ch) const { return p[(ch * h + y) * w + x]; }
};

template <typename Src>
void resample_impl(const Src& src, int64_t channels, int64_t h, int64_t w, const Window& win, int64_t out_h,
                   int64_t out_w, float k, float* out) {
  const AxisTaps tx(win.left, win.width, w, out_w), ty(win.top, win.height, h, out_h);
  const int64_t y0 = ty.lowest(), rows = ty.highest() - y0;
  // Horizontal pass into rows x out_w x C (per loader thread: no allocation once warm).
  thread_local std::vector<float> mid;
  mid.assign(static_cast<size_t>(rows * out_w * channels), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = 0; x < out_w; ++x) {
      const Taps& t = tx[x];
      float* m = &mid[static_cast<size_t>((r * out_w + x) * channels)];
      for (int64_t j = 0; j < t.count; ++j)
        for (int64_t ch = 0; ch < channels; ++ch) m[ch] += t.w[j] * src.at(y0 + r, t.first + j, ch);
    }
  for (int64_t y = 0; y < out_h; ++y) {
    const Taps& t = ty[y];
    for (int64_t x = 0; x < out_w; ++x)
      for (int64_t ch = 0; ch < channels; ++ch) {
        float v = 0;
        for (int64_t j = 0; j < t.count; ++j) v += t.w[j] * mid[static_cast<size_t>(((t.first - y0 + j) * out_w + x) * channels + ch)];
        out[(ch * out_h + y) * out_w + x] = v * k;
      }
  }
}

}  // namespace

void resample(const Image& img, const Window& win, int64_t out_h, int64_t out_w, float* out) {
  resample_impl(HwcBytes{img.pixels.data(), img.width, img.channels}, img.channels, img.height, img.width, win, out_h,
                out_w, 1.0f / 255.0f, out);
}

void resample(const float* chw, int64_t channels, int64_t h, int64_t w, const Window& win, int64_t out_h,
              int64_t out_w, float* out) {
  resample_impl(ChwFloats{chw, h, w}, channels, h, w, win, out_h, out_w, 1.0f, out);
}

}  // namespace gputrain
