// RandomResizedCrop: its boxes and pixels against torchvision's, the reduced-scale JPEG decode
// against a full one, and the flag through the binary.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "config/config.h"
#include "core/error.h"
#include "data/crop_box.h"
#include "data/decode_box.h"
#include "data/image_folder.h"
#include "data/make_dataset.h"
#include "data/resample.h"
#include "test_images.h"
#include "test_python.h"
#include "test_util.h"

using namespace gputrain;
namespace fs = std::filesystem;

namespace {

// A picture with a photo's mix: smooth shading, edges, and a little fine texture.
std::vector<uint8_t> photo(int w, int h, int channels, uint32_t seed) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * channels);
  const auto grain = test::noise(px.size(), seed);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c) {
        const double u = static_cast<double>(x) / w, v = static_cast<double>(y) / h;
        double val = 120 + 60 * std::sin(6 * u + 2 * c + seed) * std::cos(4 * v - c) + 40 * ((x / 37 + y / 29) % 2);
        const size_t i = (static_cast<size_t>(y) * w + x) * channels + c;
        val += (grain[i] - 128) / 16.0;
        px[i] = static_cast<uint8_t>(std::clamp(val, 0.0, 255.0));
      }
  return px;
}

const uint8_t* bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

std::vector<float> crop_of(const std::string& file, int channels, const CropBox& box, int64_t oh, int64_t ow,
                           bool reduce, Window* win = nullptr) {
  Window w;
  const Image img = decode_image_box(bytes(file), file.size(), channels, "x.jpg", kDefaultMaxImagePixels, box, oh, ow,
                                     reduce, &w);
  std::vector<float> out(static_cast<size_t>(channels * oh * ow));
  resample(img, w, oh, ow, out.data());
  if (win) *win = w;
  return out;
}

double psnr(const std::vector<float>& a, const std::vector<float>& b) {
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) se += (a[i] - b[i]) * (a[i] - b[i]);
  return 10 * std::log10(1.0 / (se / static_cast<double>(a.size())));
}

}  // namespace

TEST_CASE("random_resized_crop: boxes equal torchvision's for the same draws, fallback included", "[images][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::ofstream cases(dir / "cases");
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{375, 500}, {1200, 1600}, {224, 224}, {30, 1000},
                                                          {1000, 30}, {1, 1},       {7, 3},     {2000, 3}};
  const std::vector<RrcRange> ranges = {RrcRange{}, RrcRange{0.5, 1.0, 1.0, 1.0}, RrcRange{0.9, 1.0, 0.5, 2.0}};
  int fallbacks = 0;
  for (const auto& [h, w] : sizes)
    for (const auto& r : ranges)
      for (uint64_t seed = 0; seed < 40; ++seed) {
        Rng rng(mix_seed(seed, static_cast<uint64_t>(h), static_cast<uint64_t>(w)));
        std::vector<double> draws;
        const CropBox b = random_resized_crop_box(h, w, r, rng, &draws);
        CHECK((b.top >= 0 && b.left >= 0 && b.height > 0 && b.width > 0 && b.top + b.height <= h &&
               b.left + b.width <= w));
        fallbacks += draws.size() == 20;
        cases << fmt::format("{} {} {:.17g} {:.17g} {:.17g} {:.17g} {} {} {} {}", h, w, r.scale_lo, r.scale_hi,
                             r.ratio_lo, r.ratio_hi, b.top, b.left, b.height, b.width);
        for (double d : draws) cases << fmt::format(" {:.9g}", d);
        cases << "\n";
      }
  cases.close();
  CHECK(fallbacks > 40);  // the thin images take the center-crop fallback
  // A ratio range far from a 1-pixel-wide image's own: the fallback keeps a side of at least 1.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Rng rng(seed);
    const CropBox b = random_resized_crop_box(300, 1, RrcRange{0.08, 1.0, 2.0, 3.0}, rng);
    CHECK((b.width == 1 && b.height >= 1 && b.top + b.height <= 300));
  }
  std::string log;
  const int rc = test::python("rrc_check.py boxes " + (dir / "cases"), log);
  INFO(log);
  CHECK(rc == 0);
  CHECK_THAT(log, Catch::Contains("boxes: 960 of 960 equal"));
  if (log.find("torchvision absent") != std::string::npos)
    WARN("torchvision is not installed (.pydeps): boxes checked against the script's copy of its algorithm");
}

TEST_CASE("random_resized_crop: pixels within 2/255 of torchvision v2's antialiased resized_crop", "[images][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::ofstream cases(dir / "cases");
  int n = 0;
  for (int channels : {3, 1}) {
    const int w = 131, h = 97;
    auto px = photo(w, h, channels, 5);
    const std::string png = test::png_bytes(px, w, h, channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY);
    const std::string name = fmt::format("c{}.png", channels);
    test::write_file(dir / name, png);
    // Strong and mild shrinking, enlarging, a whole-image box, a one-pixel-wide box.
    for (const auto& [box, oh, ow] : std::vector<std::tuple<CropBox, int64_t, int64_t>>{
             {{0, 0, 97, 131}, 24, 32}, {{10, 20, 60, 80}, 45, 50}, {{5, 7, 20, 30}, 64, 64},
             {{0, 0, 97, 131}, 97, 131}, {{3, 100, 90, 1}, 30, 30}, {{40, 9, 33, 77}, 224, 224}}) {
      Window win;
      const Image img = decode_image_box(bytes(png), png.size(), channels, name, kDefaultMaxImagePixels, box, oh, ow,
                                         true, &win);
      std::vector<float> out(static_cast<size_t>(channels * oh * ow));
      resample(img, win, oh, ow, out.data());
      const std::string raw = fmt::format("out{}.f32", n++);
      test::write_file(dir / raw, std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float)));
      cases << fmt::format("{} {} {} {} {} {} {} {}\n", name, oh, ow, box.top, box.left, box.height, box.width, raw);
    }
  }
  cases.close();
  std::string log;
  const int rc = test::python("rrc_check.py pixels " + dir.path.string(), log);
  INFO(log);
  CHECK(rc == 0);
  if (log.find("torchvision absent") != std::string::npos)
    WARN("torchvision is not installed (.pydeps): pixels not compared");
  else
    CHECK_THAT(log, Catch::Contains("pixels: worst"));
}

TEST_CASE("reduced-scale decode: the box decoded at 1/8 to 1/2 scale is within 30 dB of a full decode", "[images]") {
  struct Case {
    int w, h, channels, subsamp;
    int64_t out;
  };
  for (const Case& k : {Case{1600, 1200, 3, TJSAMP_420, 224}, Case{1600, 1200, 3, TJSAMP_444, 224},
                        Case{1024, 768, 1, -1, 96}, Case{500, 375, 3, TJSAMP_420, 224}, Case{2000, 300, 3, TJSAMP_422, 64}}) {
    const std::string jpg = test::jpeg_bytes(photo(k.w, k.h, k.channels, 3), k.w, k.h, k.channels, 90, k.subsamp);
    int reduced = 0;
    for (uint64_t seed = 0; seed < 12; ++seed) {
      Rng rng(seed);
      const CropBox box = random_resized_crop_box(k.h, k.w, RrcRange{}, rng);
      Window win;
      const auto fast = crop_of(jpg, k.channels, box, k.out, k.out, true, &win);
      const auto full = crop_of(jpg, k.channels, box, k.out, k.out, false);
      // The same box: the window covers it at the decoded scale.
      const double s = win.height / static_cast<double>(box.height);
      CHECK(win.width / static_cast<double>(box.width) == Approx(s));
      CHECK((s == 1.0 || s == 0.5 || s == 0.25 || s == 0.125));
      CHECK((s == 1.0 || (box.height * s >= k.out && box.width * s >= k.out)));
      reduced += s < 1.0;
      INFO(fmt::format("{}x{} c{} box {}x{}+{}+{} scale {}", k.w, k.h, k.channels, box.width, box.height, box.left,
                       box.top, s));
      CHECK(psnr(fast, full) >= 30.0);
    }
    if (k.w >= 1024) CHECK(reduced > 0);
  }
  // A whole 1600x1200 picture to 224: 1/4 scale (300 rows), as 1/8 (150) would be under 224.
  const std::string jpg = test::jpeg_bytes(photo(1600, 1200, 3, 1), 1600, 1200, 3, 90, TJSAMP_420);
  Window win;
  decode_image_box(bytes(jpg), jpg.size(), 3, "x.jpg", kDefaultMaxImagePixels, {0, 0, 1200, 1600}, 224, 224, true, &win);
  CHECK(win.height == 300);
  CHECK(win.width == 400);
}

TEST_CASE("reduced-scale decode: damage inside the box fails naming the file, CMYK and PNG decode whole", "[images]") {
  std::string jpg = test::jpeg_bytes(photo(256, 256, 3, 2), 256, 256, 3, 90, TJSAMP_420);
  const size_t sos = jpg.find("\xff\xda");
  REQUIRE(sos != std::string::npos);
  const std::string cut = jpg.substr(0, sos + (jpg.size() - sos) / 3);  // the data ends a third of the way down
  Window win;
  try {
    decode_image_box(bytes(cut), cut.size(), 3, "cut.jpg", kDefaultMaxImagePixels, {128, 0, 128, 256}, 64, 64, true,
                     &win);
    FAIL("a JPEG cut above the box decoded");
  } catch (const Error& e) {
    CHECK_THAT(e.problems.at(0), Catch::StartsWith("cut.jpg: corrupt JPEG data"));
  }
  // A box above the cut needs none of the missing data.
  decode_image_box(bytes(cut), cut.size(), 3, "cut.jpg", kDefaultMaxImagePixels, {0, 0, 32, 256}, 16, 16, true, &win);
  const std::string png = test::png_bytes(photo(64, 48, 3, 4), 64, 48, PNG_FORMAT_RGB);
  const Image img = decode_image_box(bytes(png), png.size(), 3, "x.png", kDefaultMaxImagePixels, {8, 4, 20, 30}, 8, 8,
                                     true, &win);
  CHECK(img.height == 48);
  CHECK(win.top == 8);
  CHECK(win.left == 4);
}

TEST_CASE("random_resized_crop: an image folder crops each epoch anew, and its held-out part is not cropped",
          "[images][cli]") {
  test::TempDir dir;
  for (int i = 0; i < 12; ++i) {
    const std::string cls = i % 2 ? "b" : "a";
    fs::create_directories(dir / ("train/" + cls));
    test::write_file(dir / fmt::format("train/{}/{}.jpg", cls, i),
                     test::jpeg_bytes(photo(320, 240, 3, i), 320, 240, 3, 90, TJSAMP_420));
  }
  Config c;
  c.dataset = "image_folder";
  c.data_dir = dir / "train";
  c.image_size = "32";
  c.random_resized_crop = true;
  c.val_split = 0.25;
  c.normalize = false;
  const DataSplits s = make_datasets(c);
  ImageFolderOptions plain;
  plain.height = plain.width = 32;
  const auto whole = load_image_folder(dir / "train", plain);
  std::vector<float> a(3 * 32 * 32), b(a.size()), ref(a.size());
  // Held out: the whole picture resized, whatever the seed.
  bool found = false;
  for (int64_t j = 0; j < whole->size() && !found; ++j) {
    s.test->get(0, a.data(), nullptr, 1);
    whole->get(j, ref.data(), nullptr, 0);
    found = a == ref;
  }
  CHECK(found);
  s.test->get(0, b.data(), nullptr, 2);
  CHECK(a == b);
  // Training: a crop that depends on the seed, the same for the same seed.
  s.train->get(0, a.data(), nullptr, 1);
  s.train->get(0, b.data(), nullptr, 1);
  CHECK(a == b);
  s.train->get(0, b.data(), nullptr, 2);
  CHECK(a != b);

  // Normalization folded into the decode: the values of a normalizing pass after it.
  Config n = c;
  n.normalize = true;
  n.normalize_mean = n.normalize_std = "imagenet";
  const DataSplits fused = make_datasets(n);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
  for (const auto& [plain_data, fused_data] : {std::pair{s.train, fused.train}, std::pair{s.test, fused.test}}) {
    plain_data->get(1, a.data(), nullptr, 7);
    fused_data->get(1, b.data(), nullptr, 7);
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max<double>(worst, std::abs((a[i] - mean[i / 1024]) / sd[i / 1024] - b[i]));
    CHECK(worst < 1e-5);
  }

  const std::string base = "train --dataset image_folder --data_dir " + (dir / "train") +
                           " --image_size 32 --model cnn --width 4 --batch_size 4 --epochs 1 --device cpu ";
  auto r = test::run_gputrain(base + "--random_resized_crop --rrc_scale 0.25,1 --hflip --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(test::read_file(dir / "run/config.json"), Catch::Contains("\"random_resized_crop\": true") &&
                                                          Catch::Contains("\"rrc_scale\": \"0.25,1\""));
  auto cached = test::run_gputrain(base + "--random_resized_crop --cache");
  CHECK(cached.exit_code == 2);
  CHECK_THAT(cached.err, Catch::Contains("--cache with --random_resized_crop"));
  auto off = test::run_gputrain(base + "--rrc_scale 0.5,1");
  CHECK(off.exit_code == 2);
  CHECK_THAT(off.err, Catch::Contains("--rrc_scale and --rrc_ratio are for --random_resized_crop"));
  auto bad = test::run_gputrain(base + "--random_resized_crop --rrc_ratio 2,1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("rrc_ratio '2,1'"));
}

TEST_CASE("random_resized_crop: on in-memory images it crops and resizes back to the sample size", "[images][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain(
      "train --dataset synthetic --input_shape 3x16x16 --synthetic_train_size 64 --synthetic_test_size 16 --model cnn "
      "--width 4 --batch_size 16 --epochs 1 --device cpu --random_resized_crop --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  auto table = test::run_gputrain("train --dataset synthetic --input_shape 20 --random_resized_crop");
  CHECK(table.exit_code == 2);
  CHECK_THAT(table.err, Catch::Contains("--random_resized_crop need image samples"));
}
