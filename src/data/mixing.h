// MixUp and CutMix on a batch, with soft, label-smoothed targets: timm's Mixup in its "batch"
// mode (one draw per batch; sample i mixed with sample B-1-i, the batch flipped).
#pragma once
#include <cstdint>

#include "data/dataset.h"

namespace gputrain {

struct MixOptions {
  double mixup_alpha = 0;   // > 0: MixUp with its weight drawn from Beta(alpha, alpha)
  double cutmix_alpha = 0;  // > 0: CutMix with its area drawn from Beta(alpha, alpha)
  double prob = 1.0;        // chance that a batch is mixed at all
  double switch_prob = 0.5;  // with both on: chance of CutMix rather than MixUp
  double smoothing = 0;      // label smoothing folded into the targets
  int64_t classes = 0;
  bool on() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

// One batch's draw. lam is the weight of the batch's own samples: for CutMix 1 - the box's area
// share (timm's "correct_lam"), the box being rows [top, bottom) and columns [left, right).
struct MixDraw {
  double lam = 1.0;
  bool cutmix = false;
  int64_t top = 0, bottom = 0, left = 0, right = 0;
};

// Beta(a, b), from two Gamma draws (Marsaglia and Tsang), deterministic for a given Rng.
double beta_sample(double a, double b, Rng& rng);

// timm's rand_bbox and correct_lam: a box of sqrt(1 - lam) of each side centred on (cy, cx),
// clipped to the h x w image, and the weight it leaves the batch's own pixels.
MixDraw cutmix_box(double lam, int64_t h, int64_t w, int64_t cy, int64_t cx);

// timm's Mixup._params_per_batch and cutmix_bbox_and_lam for h x w images.
MixDraw draw_mix(const MixOptions& o, int64_t h, int64_t w, Rng& rng);

// Mixes `batch` samples of `channels` x h x w floats in `x` in place as `d` says, and writes
// the soft targets [batch, o.classes]: each sample's smoothed one-hot times lam plus its
// partner's times 1 - lam (timm's mixup_target).
void apply_mix(const MixOptions& o, const MixDraw& d, float* x, int64_t batch, int64_t channels, int64_t h, int64_t w,
               const int64_t* labels, float* targets);

}  // namespace gputrain
