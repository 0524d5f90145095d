// torchvision's RandomResizedCrop box, with its float32 draws and Python's round-half-to-even.
#include "data/crop_box.h"

#include <algorithm>
#include <cmath>

namespace gputrain {

CropBox random_resized_crop_box(int64_t h, int64_t w, const RrcRange& r, Rng& rng, std::vector<double>* draws) {
  const double area = static_cast<double>(h) * static_cast<double>(w);
  // torchvision takes the log of the ratio bounds in float32, and draws float32 values.
  const float log_lo = std::log(static_cast<float>(r.ratio_lo)), log_hi = std::log(static_cast<float>(r.ratio_hi));
  const auto uniform = [&](double lo, double hi) {
    const float v = static_cast<float>(lo + (hi - lo) * static_cast<double>(rng.uniform()));
    if (draws) draws->push_back(v);
    return v;
  };
  const auto below = [&](int64_t n) {
    const auto v = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
    if (draws) draws->push_back(static_cast<double>(v));
    return v;
  };
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * uniform(r.scale_lo, r.scale_hi);
    const double aspect = std::exp(uniform(log_lo, log_hi));  // float32 exp, as torch.exp on the draw
    // Python's round(): half to even, which nearbyint does in the default rounding mode.
    const auto cw = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area * aspect)));
    const auto ch = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (0 < cw && cw <= w && 0 < ch && ch <= h) {
      const int64_t top = below(h - ch + 1);
      const int64_t left = below(w - cw + 1);
      return {top, left, ch, cw};
    }
  }
  // No try fitted: the largest center box within the ratio range.
  const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
  int64_t cw = w, ch = h;
  if (in_ratio < std::min(r.ratio_lo, r.ratio_hi))
    ch = static_cast<int64_t>(std::nearbyint(static_cast<double>(cw) / std::min(r.ratio_lo, r.ratio_hi)));
  else if (in_ratio > std::max(r.ratio_lo, r.ratio_hi))
    cw = static_cast<int64_t>(std::nearbyint(static_cast<double>(ch) * std::max(r.ratio_lo, r.ratio_hi)));
  // A ratio range far from the image's own can round a side to 0 or past the image.
  ch = std::clamp<int64_t>(ch, 1, h);
  cw = std::clamp<int64_t>(cw, 1, w);
  return {(h - ch) / 2, (w - cw) / 2, ch, cw};
}

}  // namespace gputrain
