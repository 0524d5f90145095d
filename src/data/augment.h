// torchvision's RandAugment and TrivialAugmentWide (transforms.v2) on float images in [0, 1]:
// the same operations, magnitudes and draws, on the loader threads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/transforms.h"

namespace gputrain {

enum class AugmentOp {
  kIdentity, kShearX, kShearY, kTranslateX, kTranslateY, kRotate, kBrightness, kColor, kContrast, kSharpness,
  kPosterize, kSolarize, kAutoContrast, kEqualize
};
const char* augment_op_name(AugmentOp op);
// Whether torchvision applies the operation's magnitude with a random sign (geometry, colour).
bool augment_op_signed(AugmentOp op);

// One operation at one magnitude (signed where torchvision signs it) on a channels x h x w image,
// as torchvision.transforms.v2's _apply_image_or_video_transform does on a float tensor:
// geometry with nearest sampling and zero fill, colour with v2's float formulas, Equalize through
// uint8 as v2 does.
void apply_augment_op(AugmentOp op, double magnitude, float* x, int64_t channels, int64_t h, int64_t w);

// --aa: "rand-m9-n2" (RandAugment: n operations of magnitude bin m of 31, torchvision's
// defaults m9 n2) or "trivialaugmentwide" (one operation at a random bin of 31).
class AutoAugment : public Transform {
 public:
  explicit AutoAugment(const std::string& policy);
  // Whether `policy` is one --aa accepts ("" = off).
  static bool valid(const std::string& policy);
  void apply(float* x, const std::vector<int64_t>& shape, Rng& rng) const override;
  // An operation's magnitude at `bin` for an h x w image (torchvision's table for the policy).
  double magnitude(AugmentOp op, int64_t bin, int64_t h, int64_t w) const;
  const std::vector<AugmentOp>& ops() const { return ops_; }

 private:
  bool trivial_ = false;
  int64_t magnitude_bin_ = 9, num_ops_ = 2;
  std::vector<AugmentOp> ops_;
};

}  // namespace gputrain
