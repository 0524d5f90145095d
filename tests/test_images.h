// Image fixtures made in memory: JPEG (TurboJPEG) and PNG (libpng) bytes, and noise pixels.
#pragma once
#include <png.h>
#include <turbojpeg.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gputrain::test {

// subsamp: a TJSAMP_* value; -1 = 4:4:4 for colour (no chroma loss), gray for one channel.
inline std::string jpeg_bytes(const std::vector<uint8_t>& px, int w, int h, int channels, int quality = 100,
                              int subsamp = -1) {
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  if (subsamp < 0) subsamp = channels == 3 ? TJSAMP_444 : TJSAMP_GRAY;
  int rc = tjCompress2(tj, px.data(), w, 0, h, channels == 3 ? TJPF_RGB : TJPF_GRAY, &out, &size, subsamp, quality,
                       TJFLAG_ACCURATEDCT);
  REQUIRE(rc == 0);
  std::string s(reinterpret_cast<char*>(out), size);
  tjFree(out);
  tjDestroy(tj);
  return s;
}

// 8-bit PNG through libpng's simplified writer; format e.g. PNG_FORMAT_RGBA.
inline std::string png_bytes(const std::vector<uint8_t>& px, int w, int h, uint32_t format) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = w;
  img.height = h;
  img.format = format;
  png_alloc_size_t size = 0;
  REQUIRE(png_image_write_to_memory(&img, nullptr, &size, 0, px.data(), 0, nullptr));
  std::string s(size, '\0');
  REQUIRE(png_image_write_to_memory(&img, s.data(), &size, 0, px.data(), 0, nullptr));
  s.resize(size);
  return s;
}

inline std::vector<uint8_t> noise(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>((seed = seed * 1664525u + 1013904223u) >> 24);
  return v;
}

}  // namespace gputrain::test
