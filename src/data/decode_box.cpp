// Region decoding through the libjpeg API (TurboJPEG 2.1 cannot cut a region). libjpeg reports
// errors by longjmp, so the function that calls it holds only trivially destructible locals.
#include "data/decode_box.h"

// jpeglib.h needs size_t and FILE declared before it.
#include <cstdio>
#include <csetjmp>

#include <jpeglib.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace gputrain {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char error[JMSG_LENGTH_MAX];
  char warning[JMSG_LENGTH_MAX];  // the first warning of the current image
};

void on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<ErrorManager*>(c->err);
  e->pub.format_message(c, e->error);
  std::longjmp(e->jump, 1);
}

void on_message(j_common_ptr c, int level) {
  auto* e = reinterpret_cast<ErrorManager*>(c->err);
  if (level < 0 && e->warning[0] == '\0') e->pub.format_message(c, e->warning);
}

// One decompressor per loader thread, reused from image to image (jpeg_abort keeps it ready).
struct Decompressor {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  Decompressor() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
    jpeg_create_decompress(&cinfo);
  }
  ~Decompressor() { jpeg_destroy_decompress(&cinfo); }
};

struct Region {
  int eighths = 8;            // the DCT scale, in eighths
  int64_t x0 = 0, y0 = 0;     // the first decoded column and row, in scaled pixels
  int64_t width = 0, rows = 0, channels = 0;
};

enum class Outcome { kDone, kError, kNeedsFullDecode };

Outcome decode_region(Decompressor& d, const uint8_t* data, size_t size, int channels, int64_t h, int64_t w,
                      const CropBox& box, int64_t out_h, int64_t out_w, std::vector<uint8_t>& pixels, Region* r) {
  j_decompress_ptr c = &d.cinfo;
  d.err.error[0] = d.err.warning[0] = '\0';
  if (setjmp(d.err.jump)) {
    jpeg_abort_decompress(c);
    return Outcome::kError;
  }
  jpeg_mem_src(c, data, static_cast<unsigned long>(size));
  jpeg_read_header(c, TRUE);
  if (static_cast<int64_t>(c->image_height) != h || static_cast<int64_t>(c->image_width) != w) {
    // The box was drawn for the size our header walk read; a crafted file can show libjpeg another.
    std::snprintf(d.err.error, sizeof d.err.error, "its frame header says %ux%u, its first header said %ldx%ld",
                  c->image_width, c->image_height, static_cast<long>(w), static_cast<long>(h));
    jpeg_abort_decompress(c);
    return Outcome::kError;
  }
  if (c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK) {
    jpeg_abort_decompress(c);
    return Outcome::kNeedsFullDecode;  // the full decoder converts Adobe's inverted CMYK
  }
  r->eighths = 8;
  while (r->eighths > 1 && box.width * (r->eighths / 2) >= out_w * 8 &&
         box.height * (r->eighths / 2) >= out_h * 8)
    r->eighths /= 2;
  c->scale_num = static_cast<unsigned>(r->eighths);
  c->scale_denom = 8;
  c->out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(c);
  const double s = r->eighths / 8.0;
  auto x0 = static_cast<JDIMENSION>(std::floor(static_cast<double>(box.left) * s));
  const auto x1 = std::min<JDIMENSION>(c->output_width, static_cast<JDIMENSION>(std::ceil(static_cast<double>(box.left + box.width) * s)));
  JDIMENSION width = x1 - x0;
  if (width < c->output_width) jpeg_crop_scanline(c, &x0, &width);  // widened to whole iMCUs
  const auto y0 = static_cast<JDIMENSION>(std::floor(static_cast<double>(box.top) * s));
  const auto y1 = std::min<JDIMENSION>(c->output_height, static_cast<JDIMENSION>(std::ceil(static_cast<double>(box.top + box.height) * s)));
  if (width == 0 || y1 <= y0) {  // cannot happen for a box inside the image; refused, not read past
    std::snprintf(d.err.error, sizeof d.err.error, "an empty crop region");
    jpeg_abort_decompress(c);
    return Outcome::kError;
  }
  if (y0 > 0) jpeg_skip_scanlines(c, y0);
  const size_t stride = static_cast<size_t>(c->output_width) * static_cast<size_t>(c->output_components);
  pixels.resize(stride * (y1 - y0));
  while (c->output_scanline < y1) {
    JSAMPROW row = pixels.data() + (c->output_scanline - y0) * stride;
    jpeg_read_scanlines(c, &row, 1);
  }
  *r = {r->eighths, x0, y0, c->output_width, y1 - y0, c->output_components};
  jpeg_abort_decompress(c);  // the rows below the box are not needed
  return Outcome::kDone;
}

bool is_jpeg(const uint8_t* d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }

}  // namespace

Image decode_image_box(const uint8_t* data, size_t size, int channels, const std::string& path, int64_t max_pixels,
                       const CropBox& box, int64_t out_h, int64_t out_w, bool reduce, Window* win) {
  *win = {static_cast<double>(box.top), static_cast<double>(box.left), static_cast<double>(box.height),
          static_cast<double>(box.width)};
  if (!reduce || !is_jpeg(data, size)) return decode_image(data, size, channels, path, max_pixels);
  int64_t h = 0, w = 0;  // decode_image checks the header itself; here it must be checked first
  std::string why;
  if (!read_image_header(data, size, &h, &w, &why, max_pixels))
    throw usage_error(path + ": " + (why == "header not within the bytes read" ? "truncated JPEG header" : why));
  thread_local Decompressor d;
  // An exception out of decode_region (an allocation) must not leave the thread's decompressor
  // mid-image: every later JPEG on the thread would fail. (libjpeg's own errors longjmp inside.)
  struct Reset {
    j_decompress_ptr c;
    ~Reset() { jpeg_abort_decompress(c); }
  } reset{&d.cinfo};
  Image img;
  Region r;
  switch (decode_region(d, data, size, channels, h, w, box, out_h, out_w, img.pixels, &r)) {
    case Outcome::kNeedsFullDecode:
      return decode_image(data, size, channels, path, max_pixels);
    case Outcome::kError:
      throw usage_error(path + ": corrupt JPEG data (" + d.err.error + ")");
    case Outcome::kDone:
      break;
  }
  if (d.err.warning[0] != '\0' && damaging_jpeg_warning(d.err.warning, size))
    throw usage_error(path + ": corrupt JPEG data (" + d.err.warning + ")");
  img.height = r.rows;
  img.width = r.width;
  img.channels = r.channels;
  const double s = r.eighths / 8.0;
  *win = {static_cast<double>(box.top) * s - static_cast<double>(r.y0),
          static_cast<double>(box.left) * s - static_cast<double>(r.x0), static_cast<double>(box.height) * s,
          static_cast<double>(box.width) * s};
  return img;
}

}  // namespace gputrain
