// torchvision v2's augmentation operations on float tensors, written out for one CHW image.
#include "data/augment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <regex>

namespace gputrain {
namespace {

constexpr int64_t kBins = 31;  // num_magnitude_bins of both policies

// torch.linspace(lo, hi, steps)[i] in float32: the first half from lo, the second from hi.
double linspace(double lo, double hi, int64_t steps, int64_t i) {
  if (steps <= 1) return static_cast<float>(lo);  // torch.linspace(lo, hi, 1) == [lo]
  const float step = static_cast<float>((hi - lo) / static_cast<double>(steps - 1));
  const float v = i < steps / 2 ? static_cast<float>(lo) + step * static_cast<float>(i)
                                : static_cast<float>(hi) - step * static_cast<float>(steps - 1 - i);
  return v;
}

// _get_inverse_affine_matrix (center, angle, translate, scale 1, shear), in degrees.
std::array<double, 6> inverse_affine(double cx, double cy, double angle, double tx, double ty, double shear_x,
                                     double shear_y) {
  const double rad = 3.14159265358979323846 / 180.0;
  const double rot = angle * rad, sx = shear_x * rad, sy = shear_y * rad;
  const double a = std::cos(rot - sy) / std::cos(sy), b = -(a * std::tan(sx) + std::sin(rot));
  const double c = std::sin(rot - sy) / std::cos(sy), d = std::cos(rot) - c * std::tan(sx);
  std::array<double, 6> m = {d, -b, 0.0, -c, a, 0.0};
  m[2] += cx - m[0] * (cx + tx) - m[1] * (cy + ty);
  m[5] += cy - m[3] * (cx + tx) - m[4] * (cy + ty);
  return m;
}

// _affine_grid and grid_sample(nearest, zeros, align_corners=False), in float32 as torch.
void warp(const std::array<double, 6>& m, float* x, int64_t channels, int64_t h, int64_t w) {
  const float t[6] = {static_cast<float>(m[0]) / (0.5f * static_cast<float>(w)),
                      static_cast<float>(m[1]) / (0.5f * static_cast<float>(w)),
                      static_cast<float>(m[2]) / (0.5f * static_cast<float>(w)),
                      static_cast<float>(m[3]) / (0.5f * static_cast<float>(h)),
                      static_cast<float>(m[4]) / (0.5f * static_cast<float>(h)),
                      static_cast<float>(m[5]) / (0.5f * static_cast<float>(h))};
  thread_local std::vector<float> src, base_x;
  src.assign(x, x + channels * h * w);
  // The base grid's column coordinates, computed once rather than for every row.
  base_x.resize(static_cast<size_t>(w));
  for (int64_t ox = 0; ox < w; ++ox)
    base_x[static_cast<size_t>(ox)] = static_cast<float>(
        linspace((1.0 - static_cast<double>(w)) * 0.5, (static_cast<double>(w) - 1.0) * 0.5, w, ox));
  for (int64_t oy = 0; oy < h; ++oy) {
    const auto by = static_cast<float>(linspace((1.0 - static_cast<double>(h)) * 0.5, (static_cast<double>(h) - 1.0) * 0.5, h, oy));
    for (int64_t ox = 0; ox < w; ++ox) {
      const float bx = base_x[static_cast<size_t>(ox)];
      const float gx = bx * t[0] + by * t[1] + t[2], gy = bx * t[3] + by * t[4] + t[5];
      const float ix = ((gx + 1.0f) * static_cast<float>(w) - 1.0f) / 2.0f;
      const float iy = ((gy + 1.0f) * static_cast<float>(h) - 1.0f) / 2.0f;
      const auto sx = static_cast<int64_t>(std::nearbyint(ix)), sy = static_cast<int64_t>(std::nearbyint(iy));
      const bool inside = sx >= 0 && sx < w && sy >= 0 && sy < h;
      for (int64_t c = 0; c < channels; ++c)
        x[(c * h + oy) * w + ox] = inside ? src[static_cast<size_t>((c * h + sy) * w + sx)] : 0.0f;
    }
  }
}

// _blend: image * ratio + other * (1 - ratio), clamped to [0, 1]; other per pixel or constant.
void blend(float* x, int64_t n, float ratio, const float* other, float constant) {
  for (int64_t i = 0; i < n; ++i)
    x[i] = std::clamp(x[i] * ratio + (other ? other[i] : constant) * (1.0f - ratio), 0.0f, 1.0f);
}

// _rgb_to_grayscale_image without preserving the dtype: 0.2989 R + 0.587 G + 0.114 B.
std::vector<float> gray(const float* x, int64_t h, int64_t w) {
  std::vector<float> g(static_cast<size_t>(h * w));
  for (int64_t i = 0; i < h * w; ++i) g[static_cast<size_t>(i)] = x[i] * 0.2989f + x[h * w + i] * 0.587f + x[2 * h * w + i] * 0.114f;
  return g;
}

void equalize(float* x, int64_t channels, int64_t h, int64_t w) {
  const int64_t n = h * w;
  std::vector<uint8_t> u(static_cast<size_t>(n));
  for (int64_t c = 0; c < channels; ++c) {
    float* p = x + c * n;
    // to_dtype_image(uint8, scale=True): x * (255 + 1 - 1e-3), truncated.
    for (int64_t i = 0; i < n; ++i) u[static_cast<size_t>(i)] = static_cast<uint8_t>(p[i] * (256.0f - 1e-3f));
    std::array<int64_t, 256> hist{};
    for (uint8_t v : u) ++hist[v];
    std::array<int64_t, 256> cum{};
    std::partial_sum(hist.begin(), hist.end(), cum.begin());
    const int64_t top = std::max_element(cum.begin(), cum.end()) - cum.begin();  // the first bin reaching n
    const int64_t step = (n - hist[static_cast<size_t>(top)]) / 255;
    if (step == 0) {
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(u[static_cast<size_t>(i)]) / 255.0f;
      continue;
    }
    std::array<uint8_t, 256> lut{};
    for (int k = 1; k < 256; ++k) lut[k] = static_cast<uint8_t>(std::clamp<int64_t>((cum[k - 1] + step / 2) / step, 0, 255));
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(lut[u[static_cast<size_t>(i)]]) / 255.0f;
  }
}

}  // namespace

const char* augment_op_name(AugmentOp op) {
  static const char* names[] = {"Identity",   "ShearX",   "ShearY",    "TranslateX", "TranslateY",
                                "Rotate",     "Brightness", "Color",   "Contrast",   "Sharpness",
                                "Posterize",  "Solarize", "AutoContrast", "Equalize"};
  return names[static_cast<int>(op)];
}

bool augment_op_signed(AugmentOp op) {
  return op == AugmentOp::kShearX || op == AugmentOp::kShearY || op == AugmentOp::kTranslateX ||
         op == AugmentOp::kTranslateY || op == AugmentOp::kRotate || op == AugmentOp::kBrightness ||
         op == AugmentOp::kColor || op == AugmentOp::kContrast || op == AugmentOp::kSharpness;
}

void apply_augment_op(AugmentOp op, double m, float* x, int64_t channels, int64_t h, int64_t w) {
  const int64_t n = channels * h * w, plane = h * w;
  const double hw = static_cast<double>(w) * 0.5, hh = static_cast<double>(h) * 0.5;
  switch (op) {
    case AugmentOp::kIdentity:
      return;
    case AugmentOp::kShearX:  // about the top-left corner: center [0, 0]
      return warp(inverse_affine(-hw, -hh, 0, 0, 0, std::atan(m) * 180.0 / 3.14159265358979323846, 0), x, channels, h, w);
    case AugmentOp::kShearY:
      return warp(inverse_affine(-hw, -hh, 0, 0, 0, 0, std::atan(m) * 180.0 / 3.14159265358979323846), x, channels, h, w);
    case AugmentOp::kTranslateX:
      return warp(inverse_affine(0, 0, 0, static_cast<double>(static_cast<int64_t>(m)), 0, 0, 0), x, channels, h, w);
    case AugmentOp::kTranslateY:
      return warp(inverse_affine(0, 0, 0, 0, static_cast<double>(static_cast<int64_t>(m)), 0, 0), x, channels, h, w);
    case AugmentOp::kRotate: {
      const double angle = std::fmod(std::fmod(m, 360.0) + 360.0, 360.0);
      if (angle == 0) return;
      if (angle == 180 || (h == w && (angle == 90 || angle == 270))) {  // torch.rot90, exact
        thread_local std::vector<float> src;
        src.assign(x, x + n);
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t y = 0; y < h; ++y)
            for (int64_t k = 0; k < w; ++k) {
              const int64_t sy = angle == 180 ? h - 1 - y : angle == 90 ? k : w - 1 - k;
              const int64_t sk = angle == 180 ? w - 1 - k : angle == 90 ? w - 1 - y : y;
              x[(c * h + y) * w + k] = src[static_cast<size_t>((c * h + sy) * w + sk)];
            }
        return;
      }
      return warp(inverse_affine(0, 0, -angle, 0, 0, 0, 0), x, channels, h, w);
    }
    case AugmentOp::kBrightness:
      return blend(x, n, static_cast<float>(1.0 + m), nullptr, 0.0f);
    case AugmentOp::kColor: {
      if (channels != 3) return;  // as PIL: a gray image has no saturation
      const auto g = gray(x, h, w);
      for (int64_t c = 0; c < 3; ++c) blend(x + c * plane, plane, static_cast<float>(1.0 + m), g.data(), 0.0f);
      return;
    }
    case AugmentOp::kContrast: {
      double sum = 0;
      if (channels == 3) {
        for (float v : gray(x, h, w)) sum += v;
      } else {
        for (int64_t i = 0; i < n; ++i) sum += x[i];
      }
      const auto mean = static_cast<float>(sum / static_cast<double>(channels == 3 ? plane : n));
      return blend(x, n, static_cast<float>(1.0 + m), nullptr, mean);
    }
    case AugmentOp::kSharpness: {
      if (h <= 2 || w <= 2) return;
      // The 3x3 kernel (1s around a 5, over 13) on the interior, borders kept, blended.
      const float f = static_cast<float>(1.0 + m), a = 1.0f / 13.0f, b = 5.0f / 13.0f;
      thread_local std::vector<float> src;
      src.assign(x, x + n);
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t y = 1; y + 1 < h; ++y)
          for (int64_t k = 1; k + 1 < w; ++k) {
            const float* s = src.data() + (c * h + y) * w + k;
            float blur = 0;
            for (int64_t dy = -1; dy <= 1; ++dy)
              for (int64_t dk = -1; dk <= 1; ++dk) blur += s[dy * w + dk] * (dy == 0 && dk == 0 ? b : a);
            x[(c * h + y) * w + k] = s[0] + (blur - s[0]) * (1.0f - f);
          }
      for (int64_t i = 0; i < n; ++i) x[i] = std::clamp(x[i], 0.0f, 1.0f);
      return;
    }
    case AugmentOp::kPosterize: {
      const auto levels = static_cast<float>(1 << static_cast<int>(m));
      for (int64_t i = 0; i < n; ++i) x[i] = std::clamp(std::floor(x[i] * levels), 0.0f, levels - 1) * (1.0f / levels);
      return;
    }
    case AugmentOp::kSolarize:
      for (int64_t i = 0; i < n; ++i)
        if (x[i] >= static_cast<float>(m)) x[i] = 1.0f - x[i];
      return;
    case AugmentOp::kAutoContrast:
      for (int64_t c = 0; c < channels; ++c) {
        float* p = x + c * plane;
        const auto [lo, hi] = std::minmax_element(p, p + plane);
        const float low = *lo, high = *hi;
        if (low == high) continue;
        for (int64_t i = 0; i < plane; ++i) p[i] = std::clamp((p[i] - low) / (high - low), 0.0f, 1.0f);
      }
      return;
    case AugmentOp::kEqualize:
      return equalize(x, channels, h, w);
  }
}

bool AutoAugment::valid(const std::string& policy) {
  static const std::regex rand("rand(-m([0-9]{1,2}))?(-n([0-9]{1,2}))?");
  std::smatch mt;
  if (policy == "trivialaugmentwide") return true;
  if (!std::regex_match(policy, mt, rand)) return false;
  return (!mt[2].matched || std::stoi(mt[2]) < kBins) && (!mt[4].matched || (std::stoi(mt[4]) >= 1 && std::stoi(mt[4]) <= 10));
}

AutoAugment::AutoAugment(const std::string& policy) {
  trivial_ = policy == "trivialaugmentwide";
  std::smatch mt;
  if (!trivial_ && std::regex_match(policy, mt, std::regex("rand(-m([0-9]{1,2}))?(-n([0-9]{1,2}))?"))) {
    if (mt[2].matched) magnitude_bin_ = std::stoi(mt[2]);
    if (mt[4].matched) num_ops_ = std::stoi(mt[4]);
  }
  // Both tables list these in this order (RandAugment and TrivialAugmentWide's _AUGMENTATION_SPACE).
  ops_ = {AugmentOp::kIdentity,   AugmentOp::kShearX,    AugmentOp::kShearY,   AugmentOp::kTranslateX,
          AugmentOp::kTranslateY, AugmentOp::kRotate,    AugmentOp::kBrightness, AugmentOp::kColor,
          AugmentOp::kContrast,   AugmentOp::kSharpness, AugmentOp::kPosterize, AugmentOp::kSolarize,
          AugmentOp::kAutoContrast, AugmentOp::kEqualize};
}

double AutoAugment::magnitude(AugmentOp op, int64_t bin, int64_t h, int64_t w) const {
  const double wide = trivial_ ? 0.99 : 0.9;
  switch (op) {
    case AugmentOp::kShearX:
    case AugmentOp::kShearY:
      return linspace(0.0, trivial_ ? 0.99 : 0.3, kBins, bin);
    case AugmentOp::kTranslateX:
      return linspace(0.0, trivial_ ? 32.0 : 150.0 / 331.0 * static_cast<double>(w), kBins, bin);
    case AugmentOp::kTranslateY:
      return linspace(0.0, trivial_ ? 32.0 : 150.0 / 331.0 * static_cast<double>(h), kBins, bin);
    case AugmentOp::kRotate:
      return linspace(0.0, trivial_ ? 135.0 : 30.0, kBins, bin);
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness:
      return linspace(0.0, wide, kBins, bin);
    case AugmentOp::kPosterize:  // 8 - round(bin / ((bins - 1) / k)), k = 6 (wide) or 4, in float32
      return 8 - std::nearbyint(static_cast<float>(bin) / (static_cast<float>(kBins - 1) / (trivial_ ? 6.0f : 4.0f)));
    case AugmentOp::kSolarize:
      return linspace(1.0, 0.0, kBins, bin);
    default:
      return 0.0;
  }
}

void AutoAugment::apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const {
  const int64_t c = shape[0], h = shape[1], w = shape[2];
  for (int64_t k = 0; k < (trivial_ ? 1 : num_ops_); ++k) {
    const AugmentOp op = ops_[rng.below(ops_.size())];
    const int64_t bin = trivial_ ? static_cast<int64_t>(rng.below(kBins)) : magnitude_bin_;
    double m = magnitude(op, bin, h, w);
    if (augment_op_signed(op) && rng.uniform() <= 0.5f) m = -m;
    apply_augment_op(op, m, x, c, h, w);
  }
}

}  // namespace gputrain
