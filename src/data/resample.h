// Antialiased bilinear resampling of an image window into CHW floats: the resize of
// RandomResizedCrop and of the evaluation view.
#pragma once
#include <cstdint>
#include <vector>

#include "data/image_decode.h"

namespace gputrain {

// A window of an image in its pixels, possibly fractional (a box mapped onto an image decoded
// at a reduced DCT scale): rows [top, top + height), columns [left, left + width).
struct Window {
  double top = 0, left = 0, height = 0, width = 0;
};

// Resamples `win` of `img` (HWC bytes) to out_h x out_w, written as CHW floats in [0, 1] into
// `out`. Bilinear with antialias, as torch's interpolate(antialias=True) and torchvision's v2
// Resize: when shrinking, the triangle filter widens with the scale, so every source pixel
// counts. For a whole-pixel window the weights are torch's on the cropped image; the filter
// reads no pixel outside the window's whole pixels. With `mean` and `std` (one value, or one per
// channel) the output is normalized, (v - mean) / std, in the same pass.
void resample(const Image& img, const Window& win, int64_t out_h, int64_t out_w, float* out,
              const std::vector<float>& mean = {}, const std::vector<float>& std = {});

// The same for a C x H x W float image (values kept as they are).
void resample(const float* chw, int64_t channels, int64_t h, int64_t w, const Window& win, int64_t out_h,
              int64_t out_w, float* out);

}  // namespace gputrain
