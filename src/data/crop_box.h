// The crop boxes of image augmentation: torchvision's RandomResizedCrop, drawn from our Rng.
#pragma once
#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace gputrain {

// A box in an image's pixels: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width;
  }
};

// RandomResizedCrop's ranges: the box's share of the image's area, and its width / height.
// torchvision's defaults, which every ImageNet recipe since 2015 trains with.
struct RrcRange {
  double scale_lo = 0.08, scale_hi = 1.0;
  double ratio_lo = 3.0 / 4.0, ratio_hi = 4.0 / 3.0;
};

// torchvision's RandomResizedCrop.get_params for an h x w image: up to 10 tries of an area
// share and a log-uniform aspect ratio, each kept if the box fits, then a center crop clamped
// to the ratio range. The arithmetic follows torchvision's (float32 draws, Python's rounding),
// so the same draws give the same box. `draws`, when given, receives each draw in order (area
// share, log ratio, ..., then top and left): a test replays them through torchvision.
CropBox random_resized_crop_box(int64_t h, int64_t w, const RrcRange& range, Rng& rng,
                                std::vector<double>* draws = nullptr);

}  // namespace gputrain
