// JPEG and PNG decoding (libjpeg-turbo, libpng) and bilinear resizing into CHW floats.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gputrain {

// A decoded image: 8-bit pixels, rows top to bottom, channels interleaved (HWC).
struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // HWC
};

// Larger sides or pixel counts than these mean a corrupt or hostile header (a "decompression
// bomb": a small file that claims a huge image); they are refused before anything is allocated.
// The pixel limit is --max_image_pixels; its default is the one PIL users know.
constexpr int64_t kMaxImageSide = 32768;
constexpr int64_t kDefaultMaxImagePixels = 89'478'485;

// Decodes a JPEG or PNG (chosen by its magic bytes) into `channels` (1 = gray, 3 = RGB)
// channels. Alpha is dropped; gray is 0.299 R + 0.587 G + 0.114 B, as in PIL. Safe to call
// from several threads at once. Throws usage_error("<path_for_errors>: <reason>").
Image decode_image(const uint8_t* data, size_t size, int channels, const std::string& path_for_errors,
                   int64_t max_pixels = kDefaultMaxImagePixels);

// Reads only the header: true and the size when `data` starts like a JPEG or PNG whose header
// is intact and whose size is within the limits above; otherwise false, with the reason in
// `why` when given. `data` may be just the start of the file, whose whole size is `file_size`
// (0: `size`); a JPEG whose size marker lies beyond it gives false with why = "header not
// within the bytes read". A PNG too small to hold the pixels its header claims, even at
// deflate's best ratio, is refused as corrupt.
bool read_image_header(const uint8_t* data, size_t size, int64_t* h, int64_t* w, std::string* why = nullptr,
                       int64_t max_pixels = kDefaultMaxImagePixels, uint64_t file_size = 0);

// Whether a libjpeg warning means the pixels are damaged (entropy data, truncation), which must
// fail rather than train on grey; a few stray bytes in a large file do not.
bool damaging_jpeg_warning(const std::string& msg, size_t file_size);

// Bilinear resize (align_corners=false, no antialias: torch's interpolate defaults) of `img`
// to out_h x out_w, written as CHW floats in [0, 1] into `out` (channels * out_h * out_w).
// When the size already matches it only converts.
void resize_to_chw_float(const Image& img, int64_t out_h, int64_t out_w, float* out);

// The evaluation view of pretrained image models: `img`'s short side resized (bilinear, aspect
// kept) to floor(min(out_h, out_w) / crop_pct), then the center out_h x out_w cut out, into `out`
// as resize_to_chw_float writes it. crop_pct in (0, 1].
void resize_center_crop(const Image& img, int64_t out_h, int64_t out_w, double crop_pct, float* out);

}  // namespace gputrain
