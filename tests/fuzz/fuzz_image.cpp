// libFuzzer target: JPEG and PNG headers and decoding on arbitrary bytes, whole and through the
// RandomResizedCrop path (a box from the header, the region decode at a reduced scale, the
// antialiased resample). Errors for people are expected; crashes, hangs, leaks and allocations
// beyond what the size limits allow are bugs.
// LLVMFuzzerInitialize writes small real images as seeds into GPUTRAIN_FUZZ_IMAGE_SEEDS.
#include <png.h>
#include <turbojpeg.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/crop_box.h"
#include "data/decode_box.h"
#include "data/image_decode.h"
#include "data/resample.h"

namespace {

// Small enough that a decode stays well inside the fuzzer's memory limit under ASan.
constexpr int64_t kMaxPixels = int64_t{1} << 20;

void write(const std::string& path, const void* data, size_t size) {
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void write_seeds(const std::string& dir) {
  const int w = 12, h = 9;
  std::vector<uint8_t> rgb(w * h * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 37);
  for (png_uint_32 format : std::vector<png_uint_32>{PNG_FORMAT_RGB, PNG_FORMAT_GRAY, PNG_FORMAT_RGBA}) {
    png_image img{};
    img.version = PNG_IMAGE_VERSION;
    img.width = w;
    img.height = h;
    img.format = format;
    std::vector<uint8_t> px(PNG_IMAGE_SIZE(img), 128);
    std::copy(rgb.begin(), rgb.begin() + static_cast<std::ptrdiff_t>(std::min(px.size(), rgb.size())), px.begin());
    png_alloc_size_t size = 0;
    png_image_write_to_memory(&img, nullptr, &size, 0, px.data(), 0, nullptr);
    std::vector<uint8_t> out(size);
    if (png_image_write_to_memory(&img, out.data(), &size, 0, px.data(), 0, nullptr))
      write(dir + "/seed" + std::to_string(format) + ".png", out.data(), size);
  }
  tjhandle tj = tjInitCompress();
  for (int sub : {TJSAMP_444, TJSAMP_420, TJSAMP_GRAY}) {
    unsigned char* jpeg = nullptr;
    unsigned long size = 0;
    if (tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &jpeg, &size, sub, 75, 0) == 0)
      write(dir + "/seed" + std::to_string(sub) + ".jpg", jpeg, size);
    tjFree(jpeg);
  }
  tjDestroy(tj);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("GPUTRAIN_FUZZ_IMAGE_SEEDS")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int64_t h = 0, w = 0;
  std::string why;
  // The header check alone, as the folder scan runs it on the first bytes of a file.
  if (gputrain::read_image_header(data, size, &h, &w, &why, kMaxPixels, size) && (h * w > kMaxPixels || h <= 0 || w <= 0))
    __builtin_trap();
  for (int channels : {1, 3}) {
    try {
      auto img = gputrain::decode_image(data, size, channels, "fuzz", kMaxPixels);
      if (static_cast<int64_t>(img.pixels.size()) != img.height * img.width * channels) __builtin_trap();
      std::vector<float> out(static_cast<size_t>(channels) * 4 * 4);
      gputrain::resize_to_chw_float(img, 4, 4, out.data());
    } catch (const gputrain::Error&) {
    }
  }
  // The crop path: a box drawn for the header's size (an extreme ratio range included), decoded
  // to outputs small enough that the reduced scales are chosen.
  if (gputrain::read_image_header(data, size, &h, &w, &why, kMaxPixels, size)) {
    gputrain::Rng rng(size);
    for (const gputrain::RrcRange& range : {gputrain::RrcRange{}, gputrain::RrcRange{0.01, 1.0, 0.1, 10.0}})
      for (int64_t out_size : {2, 7}) {
        try {
          const auto box = gputrain::random_resized_crop_box(h, w, range, rng);
          gputrain::Window win;
          const auto img = gputrain::decode_image_box(data, size, 3, "fuzz", kMaxPixels, box, out_size, out_size,
                                                      true, &win);
          if (win.top < 0 || win.left < 0 || win.top + win.height > static_cast<double>(img.height) + 1e-6 ||
              win.left + win.width > static_cast<double>(img.width) + 1e-6)
            __builtin_trap();
          std::vector<float> out(static_cast<size_t>(3 * out_size * out_size));
          gputrain::resample(img, win, out_size, out_size, out.data(), {0.5f}, {0.25f});
        } catch (const gputrain::Error&) {
        }
      }
  }
  return 0;
}
