// JPEG/PNG decoding with sizes checked before any allocation, and a torch-compatible bilinear resize.
#include "data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {
namespace {

bool is_jpeg(const uint8_t* d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }
bool is_png(const uint8_t* d, size_t n) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return n >= 8 && std::memcmp(d, sig, 8) == 0;
}

uint32_t be16(const uint8_t* p) { return (uint32_t{p[0]} << 8) | p[1]; }
uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Returns "" when h x w is acceptable, else the reason.
std::string check_dims(int64_t h, int64_t w, int64_t max_pixels) {
  if (h <= 0 || w <= 0) return fmt::format("image has a zero dimension ({}x{})", w, h);
  if (h > kMaxImageSide || w > kMaxImageSide)
    return fmt::format("image size {}x{} is beyond {} per side (corrupt header?)", w, h, kMaxImageSide);
  if (h * w > max_pixels)
    return fmt::format("image size {}x{} is {} pixels, beyond --max_image_pixels {} (corrupt header, or raise the "
                       "limit)",
                       w, h, h * w, max_pixels);
  return "";
}

// Deflate cannot compress better than about 1032:1, so a PNG whose pixel rows (a filter byte
// and the packed samples each) need more than 1100 times its size is lying about its size.
std::string check_png_fits(const uint8_t* d, size_t n, int64_t h, int64_t w, uint64_t file_size) {
  if (n < 26) return "";
  static const int kSamples[7] = {1, 0, 3, 1, 2, 0, 4};  // per pixel, by color type
  const int depth = d[24], type = d[25];
  const int samples = type < 7 ? kSamples[type] : 0;
  if (samples == 0 || depth == 0) return "";  // libpng names the bad field
  const int64_t row = 1 + (w * samples * depth + 7) / 8;
  if (static_cast<double>(row) * static_cast<double>(h) <= 1100.0 * static_cast<double>(file_size)) return "";
  return fmt::format("corrupt PNG header: it claims {}x{} pixels, which a {}-byte file cannot hold", w, h, file_size);
}

// Walks JPEG marker segments up to the first frame header (SOFn), which holds the size.
// Our own walk, not libjpeg's, so a header prefix of the file is enough and nothing is allocated.
bool jpeg_size(const uint8_t* d, size_t n, int64_t* h, int64_t* w, std::string* why) {
  size_t pos = 2;
  while (true) {
    while (pos < n && d[pos] != 0xFF) ++pos;  // tolerate junk between segments, as libjpeg does
    while (pos < n && d[pos] == 0xFF) ++pos;  // fill bytes
    if (pos >= n) return *why = "header not within the bytes read", false;
    const uint8_t m = d[pos++];
    if (m == 0x00) continue;  // a stuffed 0xFF byte, not a marker (as libjpeg reads it)
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) continue;  // markers without a length
    if (m == 0xD9 || m == 0xDA) return *why = "corrupt JPEG header (no frame header before the image data)", false;
    if (pos + 2 > n) return *why = "header not within the bytes read", false;
    const uint32_t len = be16(d + pos);
    if (len < 2) return *why = fmt::format("corrupt JPEG header (segment length {})", len), false;
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof) {
      if (len < 8) return *why = "corrupt JPEG header (frame header too short)", false;
      if (pos + 7 > n) return *why = "header not within the bytes read", false;
      *h = be16(d + pos + 3);
      *w = be16(d + pos + 5);
      return true;
    }
    pos += len;
  }
}

bool png_size(const uint8_t* d, size_t n, int64_t* h, int64_t* w, std::string* why) {
  // Signature (8), then the IHDR chunk: length (4), "IHDR", width (4), height (4).
  if (n < 24) return *why = "truncated PNG", false;
  if (std::memcmp(d + 12, "IHDR", 4) != 0) return *why = "corrupt PNG header (first chunk is not IHDR)", false;
  *w = be32(d + 16);
  *h = be32(d + 20);
  return true;
}

// Keeps one TurboJPEG decompressor per loader thread: creating one per image is wasteful and
// a handle must not be shared between threads.
struct TjHandle {
  tjhandle h = nullptr;
  ~TjHandle() {
    if (h) tjDestroy(h);
  }
};

tjhandle thread_decompressor() {
  thread_local TjHandle t;
  if (!t.h) t.h = tjInitDecompress();
  if (!t.h) throw runtime_error(std::string("cannot start the JPEG decoder: ") + tjGetErrorStr2(nullptr));
  return t.h;
}

Image decode_jpeg(const uint8_t* data, size_t size, int channels, const std::string& path, int64_t max_pixels) {
  tjhandle tj = thread_decompressor();
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, data, static_cast<unsigned long>(size), &w, &h, &subsamp, &colorspace) != 0)
    throw usage_error(path + ": corrupt JPEG header (" + tjGetErrorStr2(tj) + ")");
  if (auto bad = check_dims(h, w, max_pixels); !bad.empty()) throw usage_error(path + ": " + bad);
  // libjpeg cannot turn CMYK into RGB itself; decode CMYK and convert below.
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int pf = cmyk ? TJPF_CMYK : channels == 1 ? TJPF_GRAY : TJPF_RGB;
  const int pf_channels = tjPixelSize[pf];
  Image img{h, w, pf_channels, std::vector<uint8_t>(static_cast<size_t>(h) * w * pf_channels)};
  if (tjDecompress2(tj, data, static_cast<unsigned long>(size), img.pixels.data(), w, 0, h, pf, 0) != 0) {
    const std::string msg = tjGetErrorStr2(tj);
    if (tjGetErrorCode(tj) == TJERR_FATAL || damaging_jpeg_warning(msg, size))
      throw usage_error(path + ": corrupt JPEG data (" + msg + ")");
  }
  if (cmyk) {
    // CMYK JPEGs come from Adobe software, which stores the channels inverted: R = C * K / 255.
    Image rgb{h, w, channels, std::vector<uint8_t>(static_cast<size_t>(h) * w * channels)};
    for (int64_t i = 0; i < int64_t{h} * w; ++i) {
      const uint8_t* p = &img.pixels[i * 4];
      int r = p[0] * p[3] / 255, g = p[1] * p[3] / 255, b = p[2] * p[3] / 255;
      if (channels == 3) {
        rgb.pixels[i * 3] = static_cast<uint8_t>(r);
        rgb.pixels[i * 3 + 1] = static_cast<uint8_t>(g);
        rgb.pixels[i * 3 + 2] = static_cast<uint8_t>(b);
      } else {
        rgb.pixels[i] = static_cast<uint8_t>((299 * r + 587 * g + 114 * b + 500) / 1000);
      }
    }
    return rgb;
  }
  return img;
}

// Frees libpng's state on every path out, including exceptions.
struct PngImage {
  png_image img;
  PngImage() {
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
  }
  ~PngImage() { png_image_free(&img); }
};

std::string png_reason(const png_image& img) {
  std::string msg = img.message;
  if (msg.find("EOF") != std::string::npos || msg.find("end of") != std::string::npos ||
      msg.find("Not enough") != std::string::npos || msg.find("truncated") != std::string::npos)
    return "truncated PNG (" + msg + ")";
  return "corrupt PNG data (" + msg + ")";
}

Image decode_png(const uint8_t* data, size_t size, int channels, const std::string& path, int64_t max_pixels) {
  PngImage p;
  if (!png_image_begin_read_from_memory(&p.img, data, size)) throw usage_error(path + ": " + png_reason(p.img));
  // 16-bit files without colour information are nearly always sRGB like 8-bit ones (PIL and
  // torchvision treat them so); libpng would otherwise assume linear and brighten them.
  p.img.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  const bool color = p.img.format & PNG_FORMAT_FLAG_COLOR;
  const bool alpha = p.img.format & PNG_FORMAT_FLAG_ALPHA;
  // Read alpha when present and drop it below: compositing would change the colours, while
  // PIL's convert("RGB") just discards alpha.
  p.img.format = (color ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY) | (alpha ? PNG_FORMAT_FLAG_ALPHA : 0);
  const int64_t h = p.img.height, w = p.img.width;
  if (auto bad = check_dims(h, w, max_pixels); !bad.empty()) throw usage_error(path + ": " + bad);
  const int src_c = (color ? 3 : 1) + (alpha ? 1 : 0);
  std::vector<uint8_t> buf(static_cast<size_t>(h * w * src_c));
  if (!png_image_finish_read(&p.img, nullptr, buf.data(), 0, nullptr))
    throw usage_error(path + ": " + png_reason(p.img));

  const int color_c = color ? 3 : 1;
  if (color_c == channels && !alpha) return Image{h, w, channels, std::move(buf)};
  Image out{h, w, channels, std::vector<uint8_t>(static_cast<size_t>(h * w * channels))};
  for (int64_t i = 0; i < h * w; ++i) {
    const uint8_t* s = &buf[i * src_c];
    uint8_t* d = &out.pixels[i * channels];
    if (channels == color_c) {
      std::memcpy(d, s, channels);
    } else if (channels == 3) {  // gray -> RGB
      d[0] = d[1] = d[2] = s[0];
    } else {  // RGB -> gray, ITU-R 601 weights as PIL's convert("L")
      d[0] = static_cast<uint8_t>((299 * s[0] + 587 * s[1] + 114 * s[2] + 500) / 1000);
    }
  }
  return out;
}

}  // namespace

// libjpeg reports damaged entropy data and truncation only as warnings, then fills the rest
// with grey; training on that silently is worse than an error, so those warnings fail. A few
// stray bytes before a marker are common in real photos and harmless (PIL ignores them), but
// many mean the data ran out of step with the image: garbage decoded as codes.
bool damaging_jpeg_warning(const std::string& msg, size_t file_size) {
  const char* extra = "Corrupt JPEG data: ";
  if (msg.find("extraneous bytes") != std::string::npos && msg.rfind(extra, 0) == 0) {
    const unsigned long n = std::strtoul(msg.c_str() + std::strlen(extra), nullptr, 10);
    return n * 100 >= file_size;  // 1% of the file or more
  }
  for (const char* bad : {"Corrupt JPEG data", "Premature end", "Inconsistent progression", "instead of RST"})
    if (msg.find(bad) != std::string::npos) return true;
  return false;
}

bool read_image_header(const uint8_t* data, size_t size, int64_t* h, int64_t* w, std::string* why,
                       int64_t max_pixels, uint64_t file_size) {
  std::string local;
  if (!why) why = &local;
  bool ok;
  if (is_jpeg(data, size))
    ok = jpeg_size(data, size, h, w, why);
  else if (is_png(data, size))
    ok = png_size(data, size, h, w, why);
  else
    return *why = "not a JPEG or PNG file", false;
  if (!ok) return false;
  *why = check_dims(*h, *w, max_pixels);
  if (why->empty() && is_png(data, size)) *why = check_png_fits(data, size, *h, *w, file_size ? file_size : size);
  return why->empty();
}

Image decode_image(const uint8_t* data, size_t size, int channels, const std::string& path, int64_t max_pixels) {
  if (channels != 1 && channels != 3)
    throw usage_error(fmt::format("{}: can decode to 1 or 3 channels, not {}", path, channels));
  // Our own header walk checks the size before libjpeg/libpng see the data or we allocate.
  int64_t h = 0, w = 0;
  std::string why;
  if (!read_image_header(data, size, &h, &w, &why, max_pixels)) {
    if (why == "header not within the bytes read") why = is_png(data, size) ? "truncated PNG" : "truncated JPEG header";
    throw usage_error(path + ": " + why);
  }
  return is_jpeg(data, size) ? decode_jpeg(data, size, channels, path, max_pixels)
                             : decode_png(data, size, channels, path, max_pixels);
}

void resize_center_crop(const Image& img, int64_t out_h, int64_t out_w, double crop_pct, float* out) {
  const int64_t ih = img.height, iw = img.width, c = img.channels;
  const auto shortest = static_cast<int64_t>(std::floor(static_cast<double>(std::min(out_h, out_w)) / crop_pct));
  // The short side to `shortest`, the other in proportion (rounded, as torchvision's Resize);
  // never below the crop.
  int64_t rh = shortest, rw = shortest;
  if (ih <= iw)
    rw = static_cast<int64_t>(std::llround(static_cast<double>(iw) * static_cast<double>(shortest) / static_cast<double>(ih)));
  else
    rh = static_cast<int64_t>(std::llround(static_cast<double>(ih) * static_cast<double>(shortest) / static_cast<double>(iw)));
  rh = std::max(rh, out_h);
  rw = std::max(rw, out_w);
  thread_local std::vector<float> resized;  // per loader thread: no allocation once warm
  resized.resize(static_cast<size_t>(c * rh * rw));
  resize_to_chw_float(img, rh, rw, resized.data());
  // torchvision's CenterCrop offsets: round((size - crop) / 2).
  const int64_t top = static_cast<int64_t>(std::llround(static_cast<double>(rh - out_h) / 2.0));
  const int64_t left = static_cast<int64_t>(std::llround(static_cast<double>(rw - out_w) / 2.0));
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < out_h; ++y)
      std::copy_n(resized.data() + (ch * rh + top + y) * rw + left, out_w, out + (ch * out_h + y) * out_w);
}

void resize_to_chw_float(const Image& img, int64_t out_h, int64_t out_w, float* out) {
  const int64_t c = img.channels, ih = img.height, iw = img.width;
  const float k = 1.0f / 255.0f;
  if (out_h == ih && out_w == iw) {
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < ih * iw; ++i) out[ch * ih * iw + i] = img.pixels[i * c + ch] * k;
    return;
  }
  // torch's source index for align_corners=false: (dst + 0.5) * in / out - 0.5, clamped at 0.
  struct Tap {
    int64_t i0, i1;
    float l1;
  };
  auto taps = [](int64_t in, int64_t outn) {
    std::vector<Tap> t(static_cast<size_t>(outn));
    const float scale = static_cast<float>(in) / static_cast<float>(outn);
    for (int64_t o = 0; o < outn; ++o) {
      float src = std::max(0.0f, (o + 0.5f) * scale - 0.5f);
      int64_t i0 = std::min(static_cast<int64_t>(src), in - 1);
      t[o] = {i0, std::min(i0 + 1, in - 1), src - static_cast<float>(i0)};
    }
    return t;
  };
  const auto ty = taps(ih, out_h), tx = taps(iw, out_w);
  const uint8_t* px = img.pixels.data();
  for (int64_t y = 0; y < out_h; ++y) {
    const Tap& a = ty[y];
    const uint8_t* r0 = px + a.i0 * iw * c;
    const uint8_t* r1 = px + a.i1 * iw * c;
    for (int64_t x = 0; x < out_w; ++x) {
      const Tap& b = tx[x];
      for (int64_t ch = 0; ch < c; ++ch) {
        float top = r0[b.i0 * c + ch] + b.l1 * (r0[b.i1 * c + ch] - r0[b.i0 * c + ch]);
        float bot = r1[b.i0 * c + ch] + b.l1 * (r1[b.i1 * c + ch] - r1[b.i0 * c + ch]);
        out[(ch * out_h + y) * out_w + x] = (top + a.l1 * (bot - top)) * k;
      }
    }
  }
}

}  // namespace gputrain
