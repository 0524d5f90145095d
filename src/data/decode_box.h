// Decoding only what a crop needs: a JPEG at a reduced DCT scale, and only the crop's rows and
// columns (libjpeg-turbo's scaled IDCT, jpeg_crop_scanline and jpeg_skip_scanlines).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/crop_box.h"
#include "data/image_decode.h"
#include "data/resample.h"

namespace gputrain {

// Decodes what the crop `box` (in the full image's pixels, from its header) needs for an out_h x
// out_w output, and sets `win` to the box in the returned image's pixels. A JPEG is decoded at
// the smallest of the scales 1/8, 1/4, 1/2 and 1 (those with SIMD IDCTs) that keeps the box at
// least out_h x out_w, and only from the box's first row to its last, in the columns around it
// that the library can cut (whole iMCUs). Rows below the box are never read, so damage there
// goes unnoticed. With `reduce` false, and for PNG and CMYK JPEGs, the image is decoded whole
// (torchvision's pixels). Throws usage_error("<path>: <reason>") as decode_image does.
Image decode_image_box(const uint8_t* data, size_t size, int channels, const std::string& path, int64_t max_pixels,
                       const CropBox& box, int64_t out_h, int64_t out_w, bool reduce, Window* win);

}  // namespace gputrain
