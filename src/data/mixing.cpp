// MixUp and CutMix as timm defines them (timm/data/mixup.py), drawn from our seeded Rng.
#include "data/mixing.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gputrain {
namespace {

double normal(Rng& rng) {  // Box-Muller
  const double u1 = 1.0 - static_cast<double>(rng.uniform()), u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double gamma_sample(double a, Rng& rng) {
  if (a < 1.0) {  // Gamma(a) = Gamma(a + 1) * U^(1/a)
    const double u = 1.0 - static_cast<double>(rng.uniform());
    return gamma_sample(a + 1.0, rng) * std::pow(u, 1.0 / a);
  }
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - static_cast<double>(rng.uniform());
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

}  // namespace

double beta_sample(double a, double b, Rng& rng) {
  const double x = gamma_sample(a, rng), y = gamma_sample(b, rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

MixDraw draw_mix(const MixOptions& o, int64_t h, int64_t w, Rng& rng) {
  MixDraw d;
  if (!o.on() || rng.uniform() >= o.prob) return d;
  if (o.mixup_alpha > 0 && o.cutmix_alpha > 0) d.cutmix = rng.uniform() < o.switch_prob;
  else d.cutmix = o.cutmix_alpha > 0;
  const double alpha = d.cutmix ? o.cutmix_alpha : o.mixup_alpha;
  d.lam = beta_sample(alpha, alpha, rng);
  if (!d.cutmix) return d;
  const auto cy = static_cast<int64_t>(rng.below(static_cast<uint64_t>(h)));
  const auto cx = static_cast<int64_t>(rng.below(static_cast<uint64_t>(w)));
  return cutmix_box(d.lam, h, w, cy, cx);
}

MixDraw cutmix_box(double lam, int64_t h, int64_t w, int64_t cy, int64_t cx) {
  MixDraw d;
  d.cutmix = true;
  const double ratio = std::sqrt(1.0 - lam);
  const auto cut_h = static_cast<int64_t>(static_cast<double>(h) * ratio);
  const auto cut_w = static_cast<int64_t>(static_cast<double>(w) * ratio);
  d.top = std::clamp<int64_t>(cy - cut_h / 2, 0, h);
  d.bottom = std::clamp<int64_t>(cy + cut_h / 2, 0, h);
  d.left = std::clamp<int64_t>(cx - cut_w / 2, 0, w);
  d.right = std::clamp<int64_t>(cx + cut_w / 2, 0, w);
  // The clipped box, not the drawn lam, says how much of each image is its own.
  d.lam = 1.0 - static_cast<double>((d.bottom - d.top) * (d.right - d.left)) / static_cast<double>(h * w);
  return d;
}

void apply_mix(const MixOptions& o, const MixDraw& d, float* x, int64_t batch, int64_t channels, int64_t h, int64_t w,
               const int64_t* labels, float* targets) {
  const int64_t numel = channels * h * w;
  if (d.lam < 1.0) {
    // Pairs (i, B-1-i) are mixed from their originals together; the middle sample of an odd
    // batch is its own partner.
    for (int64_t i = 0; i < batch / 2; ++i) {
      float* a = x + i * numel;
      float* b = x + (batch - 1 - i) * numel;
      if (d.cutmix) {
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t y = d.top; y < d.bottom; ++y)
            std::swap_ranges(a + (c * h + y) * w + d.left, a + (c * h + y) * w + d.right, b + (c * h + y) * w + d.left);
      } else {
        const auto lam = static_cast<float>(d.lam), rest = static_cast<float>(1.0 - d.lam);
        for (int64_t k = 0; k < numel; ++k) {
          const float va = a[k], vb = b[k];
          a[k] = va * lam + vb * rest;
          b[k] = vb * lam + va * rest;
        }
      }
    }
  }
  const double off = o.smoothing / static_cast<double>(o.classes), on = 1.0 - o.smoothing + off;
  for (int64_t i = 0; i < batch; ++i) {
    float* t = targets + i * o.classes;
    const int64_t own = labels[i], other = labels[batch - 1 - i];
    for (int64_t k = 0; k < o.classes; ++k) {
      const double a = k == own ? on : off, b = k == other ? on : off;
      t[k] = static_cast<float>(a * d.lam + b * (1.0 - d.lam));
    }
  }
}

}  // namespace gputrain
