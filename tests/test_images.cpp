// JPEG/PNG decoding, resizing and ImageFolder, on fixtures generated here.
#include <png.h>
#include <turbojpeg.h>
#include <zlib.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "test_errors.h"
#include "test_images.h"
#include "test_util.h"

using namespace gputrain;
using test::error_of;
using test::jpeg_bytes;
using test::noise;
using test::png_bytes;
namespace fs = std::filesystem;

namespace {

// ---- image fixtures ----

// Low-level writer for what the simplified one cannot make: 16-bit sRGB-less files, palettes.
std::string png_raw(const std::vector<uint8_t>& rows, int w, int h, int bit_depth, int color_type,
                    const std::vector<png_color>& palette = {}) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, size_t n) {
        static_cast<std::string*>(png_get_io_ptr(p))->append(reinterpret_cast<char*>(data), n);
      },
      nullptr);
  png_set_IHDR(png, info, w, h, bit_depth, color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  png_write_info(png, info);
  const size_t stride = rows.size() / h;
  for (int y = 0; y < h; ++y) png_write_row(png, rows.data() + y * stride);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// Signature + an IHDR chunk (valid CRC) claiming w x h, and nothing after it.
std::string png_header_only(uint32_t w, uint32_t h) {
  std::string chunk = "IHDR";
  for (uint32_t v : {w, h})
    for (int s : {24, 16, 8, 0}) chunk += static_cast<char>((v >> s) & 0xff);
  chunk += std::string{8, 2, 0, 0, 0};  // 8-bit RGB, no interlace
  uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(chunk.data()), static_cast<uInt>(chunk.size()));
  std::string s = "\x89PNG\r\n\x1a\n";
  s += std::string{0, 0, 0, 13} + chunk;
  for (int sh : {24, 16, 8, 0}) s += static_cast<char>((crc >> sh) & 0xff);
  return s;
}

// A JPEG whose headers are intact but whose compressed data is replaced by garbage.
std::string corrupt_jpeg() {
  std::string good = jpeg_bytes(noise(32 * 32 * 3, 7), 32, 32, 3, 95);
  size_t sos = good.find("\xff\xda");
  REQUIRE(sos != std::string::npos);
  size_t data = sos + 2 + ((uint8_t(good[sos + 2]) << 8) | uint8_t(good[sos + 3]));
  auto junk = noise(good.size() - data - 2, 99);
  std::string bad = good.substr(0, data);
  for (auto b : junk) bad += static_cast<char>(b == 0xFF ? 0x00 : b);
  return bad + "\xff\xd9";
}

Image decode(const std::string& bytes, int channels, const std::string& name = "x",
             int64_t max_pixels = kDefaultMaxImagePixels) {
  return decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), channels, name, max_pixels);
}

}  // namespace

// ---------------------------------------------------------------------------------------- CIFAR

TEST_CASE("Images: PNG decodes exactly in every common format", "[images]") {
  const int w = 3, h = 2;
  auto rgb = noise(w * h * 3, 1);
  Image a = decode(png_bytes(rgb, w, h, PNG_FORMAT_RGB), 3);
  CHECK((a.height == h && a.width == w && a.channels == 3));
  CHECK(a.pixels == rgb);

  auto rgba = noise(w * h * 4, 2);
  Image b = decode(png_bytes(rgba, w, h, PNG_FORMAT_RGBA), 3);
  for (int i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c) CHECK(b.pixels[i * 3 + c] == rgba[i * 4 + c]);  // alpha dropped, not composited

  auto gray = noise(w * h, 3);
  CHECK(decode(png_bytes(gray, w, h, PNG_FORMAT_GRAY), 1).pixels == gray);
  Image g3 = decode(png_bytes(gray, w, h, PNG_FORMAT_GRAY), 3);
  CHECK((g3.channels == 3 && g3.pixels[3] == gray[1] && g3.pixels[5] == gray[1]));
  Image rgb_as_gray = decode(png_bytes(rgb, w, h, PNG_FORMAT_RGB), 1);
  CHECK(rgb_as_gray.pixels[0] == (299 * rgb[0] + 587 * rgb[1] + 114 * rgb[2] + 500) / 1000);

  // 16-bit without gAMA: read as sRGB, so v * 257 comes back as v.
  std::vector<uint8_t> rows16;
  for (uint8_t v : rgb) rows16.insert(rows16.end(), {v, v});  // big-endian v * 257
  CHECK(decode(png_raw(rows16, w, h, 16, PNG_COLOR_TYPE_RGB), 3).pixels == rgb);

  std::vector<png_color> pal = {{255, 0, 0}, {0, 128, 0}, {1, 2, 3}};
  Image p = decode(png_raw({0, 1, 2, 2, 1, 0}, w, h, 8, PNG_COLOR_TYPE_PALETTE, pal), 3);
  CHECK(p.pixels == std::vector<uint8_t>{255, 0, 0, 0, 128, 0, 1, 2, 3, 1, 2, 3, 0, 128, 0, 255, 0, 0});
}

TEST_CASE("Images: JPEG decodes close to its source", "[images]") {
  // A smooth image: JPEG at quality 100 reproduces it within a few levels.
  const int w = 16, h = 8;
  std::vector<uint8_t> rgb(w * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) rgb[(y * w + x) * 3 + c] = static_cast<uint8_t>(40 + 8 * x + 10 * y + 30 * c);
  Image a = decode(jpeg_bytes(rgb, w, h, 3), 3);
  REQUIRE((a.height == h && a.width == w && a.channels == 3));
  for (size_t i = 0; i < rgb.size(); ++i) CHECK(std::abs(int(a.pixels[i]) - int(rgb[i])) <= 3);

  std::vector<uint8_t> gray(w * h);
  for (int i = 0; i < w * h; ++i) gray[i] = static_cast<uint8_t>(20 + i);
  Image g = decode(jpeg_bytes(gray, w, h, 1), 1);
  REQUIRE(g.channels == 1);
  for (size_t i = 0; i < gray.size(); ++i) CHECK(std::abs(int(g.pixels[i]) - int(gray[i])) <= 3);
  Image g3 = decode(jpeg_bytes(gray, w, h, 1), 3);  // gray JPEG expanded to RGB
  CHECK((g3.channels == 3 && g3.pixels[30] == g3.pixels[31]));

  int64_t hh = 0, ww = 0;
  auto bytes = jpeg_bytes(gray, w, h, 1);
  CHECK(read_image_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &hh, &ww));
  CHECK((hh == h && ww == w));
}

TEST_CASE("Images: broken data gives one clear error each", "[images]") {
  auto msg = error_of([] { decode("hello, world", 3, "a/notes.jpg"); });
  CHECK_THAT(msg, Catch::Contains("a/notes.jpg") && Catch::Contains("not a JPEG or PNG file"));
  msg = error_of([] { decode(corrupt_jpeg(), 3, "bad.jpg"); });
  CHECK_THAT(msg, Catch::StartsWith("bad.jpg: corrupt JPEG data ("));
  auto jpg = jpeg_bytes(noise(64 * 64 * 3, 5), 64, 64, 3);
  msg = error_of([&] { decode(jpg.substr(0, jpg.size() / 2), 3, "half.jpg"); });
  CHECK_THAT(msg, Catch::Contains("half.jpg: corrupt JPEG data"));
  msg = error_of([&] { decode(jpg.substr(0, 40), 3, "head.jpg"); });
  CHECK_THAT(msg, Catch::Contains("head.jpg: truncated"));
  // A few stray bytes before the end marker are common in real photos and harmless.
  std::string stray = jpg.substr(0, jpg.size() - 2) + std::string(3, '\0') + "\xff\xd9";
  CHECK(decode(stray, 3).pixels == decode(jpg, 3).pixels);
  auto png = png_bytes(noise(64 * 64 * 3, 6), 64, 64, PNG_FORMAT_RGB);
  msg = error_of([&] { decode(png.substr(0, png.size() / 2), 3, "half.png"); });
  CHECK_THAT(msg, Catch::Contains("half.png: truncated PNG"));
  msg = error_of([&] { decode(png.substr(0, 20), 3, "tiny.png"); });
  CHECK_THAT(msg, Catch::Contains("tiny.png: truncated PNG"));

  // 100000 x 100000 would be 30 GB; refused from the header alone.
  msg = error_of([] { decode(png_header_only(100000, 100000), 3, "huge.png"); });
  CHECK_THAT(msg, Catch::Contains("huge.png: image size 100000x100000 is beyond 32768 per side"));
  // 10000 x 10000 is within the sides, beyond the pixel limit; raised, the 69-byte file still
  // cannot hold it (deflate's best ratio is about 1032:1).
  msg = error_of([] { decode(png_header_only(10000, 10000), 3, "bomb.png"); });
  CHECK_THAT(msg, Catch::Contains("bomb.png: image size 10000x10000 is 100000000 pixels, beyond --max_image_pixels"));
  msg = error_of([] { decode(png_header_only(10000, 10000), 3, "bomb.png", 200'000'000); });
  CHECK_THAT(msg, Catch::Contains("bomb.png: corrupt PNG header: it claims 10000x10000 pixels, which a"));
  // The best compression real data gets is well inside that bound.
  auto black = png_bytes(std::vector<uint8_t>(1500 * 1500 * 3, 0), 1500, 1500, PNG_FORMAT_RGB);
  CHECK(decode(black, 3).pixels.size() == 1500u * 1500 * 3);
  std::string big = jpg;
  size_t sof = big.find("\xff\xc0");
  REQUIRE(sof != std::string::npos);
  big[sof + 5] = big[sof + 7] = '\x9c';  // height and width 0x9c40 = 40000
  big[sof + 6] = big[sof + 8] = '\x40';
  msg = error_of([&] { decode(big, 3, "big.jpg"); });
  CHECK_THAT(msg, Catch::Contains("big.jpg: image size 40000x40000 is beyond 32768 per side"));
  msg = error_of([] { decode(png_header_only(0, 5), 3, "zero.png"); });
  CHECK_THAT(msg, Catch::Contains("zero.png") && Catch::Contains("zero dimension"));
}

TEST_CASE("Images: bilinear resize matches torch's interpolate", "[images]") {
  Image img{4, 4, 1, {}};
  for (int i = 0; i < 16; ++i) img.pixels.push_back(static_cast<uint8_t>(10 * i));  // p[y][x] = 40y + 10x
  std::vector<float> out(4);
  resize_to_chw_float(img, 2, 2, out.data());
  // Halving samples at 0.5 and 2.5: each output is the mean of a 2x2 block.
  CHECK(out[0] == Approx(25 / 255.0f));   // (0 + 10 + 40 + 50) / 4
  CHECK(out[1] == Approx(45 / 255.0f));   // (20 + 30 + 60 + 70) / 4
  CHECK(out[3] == Approx(125 / 255.0f));  // (100 + 110 + 140 + 150) / 4

  Image row{1, 2, 1, {0, 100}};
  std::vector<float> up(4);
  resize_to_chw_float(row, 1, 4, up.data());  // sources -0.25 (clamped), 0.25, 0.75, 1.25 (clamped)
  CHECK(up[0] == Approx(0.0f));
  CHECK(up[1] == Approx(25 / 255.0f));
  CHECK(up[2] == Approx(75 / 255.0f));
  CHECK(up[3] == Approx(100 / 255.0f));

  Image rgb{2, 2, 3, noise(12, 4)};
  std::vector<float> same(12);
  resize_to_chw_float(rgb, 2, 2, same.data());
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 4; ++i) CHECK(same[c * 4 + i] == rgb.pixels[i * 3 + c] * (1.0f / 255.0f));  // exact, HWC -> CHW
}

// -------------------------------------------------------------------------------- ImageFolder

namespace {

// A 4x4 PNG of one colour, so a loaded sample says which file it came from.
void write_png(const std::string& path, uint8_t value, uint32_t format = PNG_FORMAT_RGB) {
  fs::create_directories(fs::path(path).parent_path());
  test::write_file(path,
                   png_bytes(std::vector<uint8_t>(4 * 4 * PNG_IMAGE_PIXEL_CHANNELS(format), value), 4, 4, format));
}

ImageFolderOptions opts(int64_t size, int channels = 3, bool skip_bad = false) {
  ImageFolderOptions o;
  o.height = o.width = size;
  o.channels = channels;
  o.skip_bad = skip_bad;
  return o;
}

}  // namespace

TEST_CASE("ImageFolder: classes, order, labels and values", "[images]") {
  test::TempDir dir;
  const std::string root = dir / "train";
  write_png(root + "/dog/x.png", 50);
  write_png(root + "/cat/b.png", 20);
  write_png(root + "/cat/a.PNG", 10);
  write_png(root + "/cat/sub/d.png", 40);  // nested folders count, as in torchvision
  test::write_file(root + "/cat/c.jpg", jpeg_bytes(std::vector<uint8_t>(8 * 8 * 3, 30), 8, 8, 3));
  write_png(root + "/cat/.hidden.png", 99);
  test::write_file(root + "/cat/notes.txt", "not an image");
  write_png(root + "/.git/objects.png", 99);
  test::write_file(root + "/README", "top-level files are ignored");

  ImageFolderDataset ds(root, opts(2));
  CHECK(ds.class_names() == std::vector<std::string>{"cat", "dog"});
  CHECK(ds.num_classes() == 2);
  REQUIRE(ds.size() == 5);
  CHECK(ds.sample_shape() == std::vector<int64_t>{3, 2, 2});
  std::vector<float> x(12);
  const int values[] = {10, 20, 30, 40, 50}, labels[] = {0, 0, 0, 0, 1};
  for (int i = 0; i < 5; ++i) {
    CHECK(ds.get(i, x.data(), nullptr, 0) == labels[i]);
    CHECK(x[0] == Approx(values[i] / 255.0f).margin(2 / 255.0));
    CHECK(x[11] == Approx(values[i] / 255.0f).margin(2 / 255.0));
  }
  CHECK(fs::path(ds.path(2)).filename() == "c.jpg");
  CHECK(ds.bad_samples() == 0);

  // Gray: one channel, from an RGB file too.
  ImageFolderDataset gray(root, opts(3, 1));
  CHECK(gray.sample_shape() == std::vector<int64_t>{1, 3, 3});
  std::vector<float> g(9);
  CHECK(gray.get(4, g.data(), nullptr, 0) == 1);
  CHECK(g[8] == Approx(50 / 255.0f));

  // Many loader threads at once: each keeps its own decoder.
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      std::vector<float> y(12);
      for (int r = 0; r < 50; ++r)
        for (int i = 0; i < 5; ++i)
          if (ds.get(i, y.data(), nullptr, 0) != labels[i]) ++wrong;
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
}

TEST_CASE("ImageFolder: a validation folder uses the training classes", "[images]") {
  test::TempDir dir;
  for (auto c : {"ant", "bee", "cow"}) write_png(dir / (std::string("train/") + c + "/1.png"), 1);
  write_png(dir / "val/cow/1.png", 7);
  ImageFolderDataset train(dir / "train", opts(4));
  auto o = opts(4);
  o.classes = train.class_names();
  auto val = load_image_folder(dir / "val", o);
  CHECK(val->num_classes() == 3);
  std::vector<float> x(48);
  CHECK(val->get(0, x.data(), nullptr, 0) == 2);  // "cow" is class 2 in training, not 0

  write_png(dir / "val/dog/1.png", 7);
  auto msg = error_of([&] { ImageFolderDataset(dir / "val", o); });
  CHECK_THAT(msg, Catch::Contains("'dog'") && Catch::Contains("not one of the 3 training classes"));
}

TEST_CASE("ImageFolder: a corrupt body fails loading, or is replaced with skip_bad", "[images]") {
  test::TempDir dir;
  const std::string root = dir / "r";
  write_png(root + "/a/1.png", 10);
  test::write_file(root + "/a/2.jpg", corrupt_jpeg());
  write_png(root + "/b/3.png", 30);
  std::vector<float> x(3 * 4 * 4);

  ImageFolderDataset strict(root, opts(4));  // the header is fine, so the scan passes
  REQUIRE(strict.size() == 3);
  auto msg = error_of([&] { strict.get(1, x.data(), nullptr, 0); });
  CHECK_THAT(msg, Catch::Contains(root + "/a/2.jpg") && Catch::Contains("corrupt JPEG data"));

  ImageFolderDataset lenient(root, opts(4, 3, true));
  for (int round = 0; round < 3; ++round) {
    CHECK(lenient.get(1, x.data(), nullptr, 0) == 1);  // the next sample, b/3.png, label and all
    CHECK(x[0] == Approx(30 / 255.0f));
  }
  CHECK(lenient.bad_samples() == 1);  // counted once however often it is met
  CHECK(lenient.bad_files() == std::vector<std::string>{root + "/a/2.jpg"});
  CHECK(lenient.get(0, x.data(), nullptr, 0) == 0);
  CHECK(x[0] == Approx(10 / 255.0f));
}

TEST_CASE("ImageFolder: bad files are found while scanning", "[images]") {
  test::TempDir dir;
  const std::string root = dir / "r";
  write_png(root + "/a/1.png", 10);
  write_png(root + "/b/2.png", 20);
  test::write_file(root + "/a/fake.jpg", "this is text, not a JPEG\n");
  auto msg = error_of([&] { ImageFolderDataset(root, opts(4)); });
  CHECK_THAT(msg, Catch::Contains(root + "/a/fake.jpg") && Catch::Contains("not a JPEG or PNG file"));

  ImageFolderDataset skip(root, opts(4, 3, true));
  CHECK(skip.size() == 2);
  CHECK(skip.bad_samples() == 1);
  CHECK(skip.bad_files() == std::vector<std::string>{root + "/a/fake.jpg"});

  fs::remove(root + "/a/fake.jpg");
  test::write_file(root + "/b/huge.png", png_header_only(100000, 100000));
  msg = error_of([&] { ImageFolderDataset(root, opts(4)); });
  CHECK_THAT(msg, Catch::Contains(root + "/b/huge.png") && Catch::Contains("beyond 32768 per side"));

  // A class left with no good image is an error even with skip_bad.
  fs::remove(root + "/b/2.png");
  msg = error_of([&] { ImageFolderDataset(root, opts(4, 3, true)); });
  CHECK_THAT(msg, Catch::Contains(root + "/b") && Catch::Contains("no readable images"));
}

TEST_CASE("ImageFolder: a wrong layout explains the expected one", "[images]") {
  test::TempDir dir;
  auto hint_of = [](const std::string& root) {
    try {
      ImageFolderDataset(root, opts(4));
    } catch (const Error& e) {
      CHECK(e.exit_code == 2);
      CHECK_THAT(e.problems[0], Catch::Contains(root));
      CHECK_THAT(e.hint, Catch::Contains("ROOT/cat/001.jpg"));
      return e.problems[0];
    }
    FAIL("no error thrown");
    return std::string();
  };
  CHECK_THAT(hint_of(dir / "missing"), Catch::Contains("not found"));
  fs::create_directories(dir / "empty");
  CHECK_THAT(hint_of(dir / "empty"), Catch::Contains("is empty"));
  write_png(dir / "flat/1.png", 1);  // images straight in the root, no class folders
  CHECK_THAT(hint_of(dir / "flat"), Catch::Contains("no class subfolders"));
  write_png(dir / "one/a/1.png", 1);
  fs::create_directories(dir / "one/b");
  test::write_file(dir / "one/b/readme.txt", "no images here");
  CHECK_THAT(hint_of(dir / "one"), Catch::Contains("one/b") && Catch::Contains("no .jpg/.jpeg/.png images"));
}

TEST_CASE("ImageFolder: a decompression bomb is refused from its header, through the binary", "[images]") {
  test::TempDir dir;
  const std::string root = dir / "r";
  for (int i = 0; i < 4; ++i) {
    write_png(root + "/a/" + std::to_string(i) + ".png", 10);
    write_png(root + "/b/" + std::to_string(i) + ".png", 200);
  }
  test::write_file(root + "/b/bomb.png", png_header_only(10000, 10000));  // 69 bytes
  const std::string train = "train --dataset image_folder --image_size 4 --model mlp --epochs 1 --batch_size 2 "
                            "--data_dir " + root + " --output_dir " + (dir / "run");
  auto r = test::run_gputrain(train);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(root + "/b/bomb.png: image size 10000x10000 is 100000000 pixels, beyond "
                                           "--max_image_pixels 89478485"));
  CHECK_FALSE(fs::exists(dir / "run"));
  // Raised, the header still cannot be true of a 69-byte file.
  auto raised = test::run_gputrain(train + " --max_image_pixels 200000000");
  CHECK(raised.exit_code == 2);
  CHECK_THAT(raised.err, Catch::Contains("bomb.png: corrupt PNG header"));
}

TEST_CASE("crop_pct: the evaluation view resizes the short side and cuts out the center", "[images]") {
  Image img;
  img.height = 40;
  img.width = 60;
  img.channels = 1;
  img.pixels.resize(40 * 60);
  for (int64_t i = 0; i < 40 * 60; ++i) img.pixels[i] = static_cast<uint8_t>(i % 251);
  // Short side 40 = floor(32 / 0.8): no resize, the center 32x32 starts at row 4, column 14.
  std::vector<float> out(32 * 32);
  resize_center_crop(img, 32, 32, 0.8, out.data());
  for (int64_t y = 0; y < 32; ++y)
    for (int64_t x = 0; x < 32; ++x) REQUIRE(out[y * 32 + x] == img.pixels[(4 + y) * 60 + 14 + x] * (1.0f / 255.0f));
  // crop_pct 1 on a square image is the plain resize.
  img.width = 40;
  img.pixels.resize(40 * 40);
  std::vector<float> plain(20 * 20), cropped(20 * 20);
  resize_to_chw_float(img, 20, 20, plain.data());
  resize_center_crop(img, 20, 20, 1.0, cropped.data());
  CHECK(plain == cropped);
}
