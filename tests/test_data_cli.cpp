// End to end, one training run per data format on fixtures the test writes, and the bad-input
// exits: the built binary, run as a user would.
#include <png.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "test_util.h"

using namespace gputrain;
using test::read_jsonl;
using test::run_gputrain;
namespace fs = std::filesystem;

namespace {

// Small and quick: tests check that each format trains, not how well.
const std::string kQuick =
    " --epochs 3 --batch_size 16 --num_workers 2 --monitor_interval 0 --log_every 5"
    " --lr_schedule constant --lr 0.01 ";

nlohmann::json summary_of(const std::string& run) {
  auto records = read_jsonl(run + "/metrics.jsonl");
  REQUIRE(!records.empty());
  REQUIRE(records.back()["event"] == "summary");
  return records.back();
}

std::vector<double> step_losses(const std::string& run) {
  std::vector<double> losses;
  for (const auto& r : read_jsonl(run + "/metrics.jsonl"))
    if (r["event"] == "step") losses.push_back(r["loss"].get<double>());
  return losses;
}

// A .npy file: float32 (or int64 with `ints`) values of `shape`.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<double>& values,
               bool ints) {
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ",";
  std::string header =
      "{'descr': '" + std::string(ints ? "<i8" : "<f4") + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  for (double v : values) {
    char buf[8];
    if (ints) {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(buf, &x, 8);
      bytes.append(buf, 8);
    } else {
      float x = static_cast<float>(v);
      std::memcpy(buf, &x, 4);
      bytes.append(buf, 4);
    }
  }
  test::write_file(path, bytes);
}

// An unsigned-byte IDX file (MNIST's format): magic, big-endian dimensions, the bytes.
void write_idx(const std::string& path, const std::vector<int32_t>& dims, const std::vector<uint8_t>& data) {
  std::string bytes{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (int32_t d : dims)
    for (int shift : {24, 16, 8, 0}) bytes += static_cast<char>((d >> shift) & 0xff);
  bytes.append(data.begin(), data.end());
  test::write_file(path, bytes);
}

void write_png(const std::string& path, int h, int w, uint8_t r, uint8_t g, uint8_t b) {
  std::vector<uint8_t> px(static_cast<size_t>(h * w * 3));
  for (size_t i = 0; i < px.size(); i += 3) px[i] = r, px[i + 1] = g, px[i + 2] = b;
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(w);
  img.height = static_cast<png_uint_32>(h);
  img.format = PNG_FORMAT_RGB;
  REQUIRE(png_image_write_to_file(&img, path.c_str(), 0, px.data(), 0, nullptr));
}

}  // namespace

TEST_CASE("data cli: CSV regression trains, computes and stores normalization", "[data_cli]") {
  test::TempDir dir;
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(0, 0.05);
  std::string csv = "a,b,unused,y\n";
  for (int i = 0; i < 400; ++i) {
    double a = std::uniform_real_distribution<double>(-1, 1)(rng) * 10 + 50,
           b = std::uniform_real_distribution<double>(0, 2)(rng);
    csv += std::to_string(a) + "," + std::to_string(b) + ",x" + std::to_string(i) + "," +
           std::to_string(0.1 * (a - 50) - b + noise(rng)) + "\n";
  }
  test::write_file(dir / "train.csv", csv);
  auto r = run_gputrain("train --dataset csv --train_file " + (dir / "train.csv") +
                        " --target y --features a,b --model mlp --width 32 --val_split 0.2" + kQuick + "--output_dir " +
                        (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("regression, 1 target(s)") && Catch::Contains("320 train, 80 validation") &&
                        Catch::Contains("| mae "));
  auto s = summary_of(dir / "run");
  CHECK(s["best_test_loss"].get<double>() < 0.2);  // MSE; the target's variance is about 0.66
  CHECK(s["final_test_mae"].get<double>() < 0.4);
  auto config = nlohmann::json::parse(test::read_file(dir / "run/config.json"));
  CHECK(config["requested"]["normalize_mean"] == "");  // asked: compute them
  auto mean = config["resolved"]["normalize_mean"].get<std::string>();
  CHECK(mean.find(',') != std::string::npos);  // two features, two means
  CHECK(std::stod(mean) == Approx(50).margin(1.5));
  // The default preset's label smoothing (Fashion-MNIST's) reads n/a here, with why.
  CHECK(config["requested"]["label_smoothing"].get<double>() > 0);
  CHECK(config["resolved"]["label_smoothing"] == "n/a");
  CHECK_THAT(config["reasons"]["label_smoothing"].get<std::string>(), Catch::Contains("regression"));
}

TEST_CASE("data cli: CSV windows over a series train a sequence classifier", "[data_cli]") {
  test::TempDir dir;
  std::string csv = "t,signal,regime\n";
  for (int i = 0; i < 600; ++i)  // the regime flips every 50 rows; the signal's sign follows it
    csv += std::to_string(i) + "," + std::to_string(((i / 50) % 2 ? 1.0 : -1.0) * (1 + (i % 7) * 0.1)) + "," +
           ((i / 50) % 2 ? "up" : "down") + "\n";
  test::write_file(dir / "series.csv", csv);
  auto r = run_gputrain("train --dataset csv --train_file " + (dir / "series.csv") +
                        " --target regime --features signal --window 8 --stride 2 --horizon 0 --model mlp --width 16" +
                        kQuick + "--output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("2 classes") && Catch::Contains("x window 8"));
  CHECK(summary_of(dir / "run")["best_test_accuracy"].get<double>() > 0.8);
}

TEST_CASE("data cli: NumPy volumes (N, 2, 4, 3, 3) with integer labels train", "[data_cli]") {
  test::TempDir dir;
  const int n = 240;
  std::vector<double> x, y;
  std::mt19937 rng(2);
  for (int i = 0; i < n; ++i) {
    int label = i % 3;
    y.push_back(label);
    for (int k = 0; k < 2 * 4 * 3 * 3; ++k)
      x.push_back((k % 3 == label ? 1.0 : 0.0) + std::uniform_real_distribution<double>(0, 0.5)(rng));
  }
  write_npy(dir / "x.npy", {n, 2, 4, 3, 3}, x, false);
  write_npy(dir / "y.npy", {n}, y, true);
  auto r = run_gputrain("train --dataset npy --train_file " + (dir / "x.npy") + " --train_targets " + (dir / "y.npy") +
                        " --model mlp --width 32" + kQuick + "--output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("3 classes") && Catch::Contains("no test split, --val_split 0.1 by default"));
  CHECK(summary_of(dir / "run")["best_test_accuracy"].get<double>() > 0.9);
  auto losses = step_losses(dir / "run");
  REQUIRE(losses.size() >= 2);
  CHECK(losses.back() < losses.front());
}

TEST_CASE("data cli: an image folder trains, a bad image stops it, or is skipped and counted", "[data_cli]") {
  test::TempDir dir;
  for (const char* split : {"train", "val"})
    for (int c = 0; c < 2; ++c) {
      auto folder = dir.path / "images" / split / (c ? "red" : "blue");
      std::filesystem::create_directories(folder);
      for (int i = 0; i < (std::string(split) == "train" ? 24 : 8); ++i)
        write_png((folder / ("img" + std::to_string(i) + ".png")).string(), 10 + i % 3, 12, c ? 200 : 20,
                  static_cast<uint8_t>(i * 5), c ? 20 : 200);
    }
  test::write_file((dir.path / "images/train/red/broken.png").string(), "this is not an image");
  const std::string args = "train --dataset image_folder --data_dir " + (dir / "images") +
                           " --image_size 8 --model cnn --width 4 --hflip --color_jitter 0.2,0.2,0.2,0.05 --cache" +
                           kQuick;

  auto bad = run_gputrain(args + "--output_dir " + (dir / "bad"));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("broken.png") && Catch::Contains("not a JPEG or PNG"));

  auto r = run_gputrain(args + "--skip_bad_samples --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("2 classes") && Catch::Contains("48 train, 16 test") &&
                        Catch::Contains("1 bad samples skipped"));
  auto s = summary_of(dir / "run");
  CHECK(s["bad_samples"] == 1);
  CHECK(s["best_test_accuracy"].get<double>() > 0.9);
}

TEST_CASE("data cli: bad data flags and missing files exit 2 with one clear line", "[data_cli]") {
  test::TempDir dir;
  std::string rows = "a,b\n";
  for (int i = 0; i < 20; ++i) rows += std::to_string(i) + "," + std::to_string(i % 2) + "\n";
  test::write_file(dir / "t.csv", rows);
  struct Case {
    std::string args, expect;
  };
  std::vector<Case> cases = {
      {"--dataset csv --target y", "needs --train_file"},
      {"--dataset csv --train_file " + (dir / "t.csv"), "needs --target"},
      {"--dataset csv --train_file " + (dir / "t.csv") + " --target nope", "nope"},
      {"--dataset csv --train_file " + (dir / "missing.csv") + " --target b", "missing.csv"},
      {"--dataset csv --train_file " + (dir / "t.csv") + " --target b --random_crop 2 --model mlp",
       "need image samples"},
      {"--dataset csv --train_file " + (dir / "t.csv") + " --target b --model cnn",
       "model 'cnn' needs samples of shape C x H x W"},
      {"--dataset cifar10 --data_dir " + (dir / "nothing"), "data_batch_1.bin"},
      {"--dataset npy --train_file " + (dir / "t.csv"), "t.csv"},
      {"--dataset synthetic --task regression", "task 'regression'"},
      {"--color_jitter 0.4,x", "color_jitter '0.4,x'"},
      {"--normalize_mean 0.5", "go together"},
      {"--image_size 0x3", "image_size '0x3'"},
      {"--train_targets y.npy", "--train_targets and --test_targets are for --dataset npy"},
      {"--skip_bad_samples", "for --dataset image_folder"},
      {"--input_shape 3x8x8", "for --dataset synthetic"},
      {"--dataset csv --train_file " + (dir / "t.csv") + " --target b --stride 2", "for --dataset csv with --window"},
  };
  for (const auto& c : cases) {
    auto r = run_gputrain("train " + c.args + " --output_dir " + (dir / "run"));
    INFO(c.args << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.expect));
  }
}

TEST_CASE("data cli: labels and values are checked at load: exit 2 naming the file, no run folder", "[data_cli]") {
  test::TempDir dir;
  // An MNIST-family set (10 classes) with a label of 200.
  fs::create_directories(dir / "idx");
  std::vector<uint8_t> labels = {0, 1, 2, 3, 200, 5, 6, 7};
  for (const char* split : {"train", "t10k"}) {
    write_idx(dir / ("idx/" + std::string(split) + "-images-idx3-ubyte"), {8, 4, 4}, std::vector<uint8_t>(128, 7));
    write_idx(dir / ("idx/" + std::string(split) + "-labels-idx1-ubyte"), {8}, labels);
  }
  // NumPy labels with a gap (no class 1), NaN features, and one-class CSV.
  std::vector<double> x(8 * 3, 0.5), gap = {0, 2, 0, 2, 0, 2, 0, 2};
  write_npy(dir / "x.npy", {8, 3}, x, false);
  write_npy(dir / "gap.npy", {8}, gap, true);
  x[7] = NAN;
  write_npy(dir / "xnan.npy", {8, 3}, x, false);
  test::write_file(dir / "one.csv", "a,y\n1,cat\n2,cat\n3,cat\n4,cat\n");
  struct Case {
    std::string args, expect;
  };
  const std::string npy = "--dataset npy --model mlp --train_file ";
  std::vector<Case> cases = {
      {"--dataset fashion-mnist --model mlp --data_dir " + (dir / "idx"),
       "train-labels-idx1-ubyte: label 200 at index 4 is outside 0..9 (10 classes)"},
      {npy + (dir / "x.npy") + " --train_targets " + (dir / "gap.npy"),
       "gap.npy: labels run 0..2 but 1 of these 3 classes have no sample (first: 1)"},
      {npy + (dir / "x.npy") + " --train_targets " + (dir / "gap.npy") + " --num_classes 2",
       "label 2 at index 1 is outside 0..1 (2 classes)"},
      {npy + (dir / "xnan.npy") + " --train_targets " + (dir / "gap.npy") + " --num_classes 3",
       "xnan.npy: 1 feature value is NaN or infinite as float32 (first at flat index 7)"},
      {"--dataset csv --model mlp --train_file " + (dir / "one.csv") + " --target y", "1 class only"},
      {"--dataset csv --model mlp --train_file " + (dir / "one.csv") + " --target a --task regression --num_classes 3",
       "--num_classes is for classification"},
  };
  for (const auto& c : cases) {
    auto r = run_gputrain("train " + c.args + " --epochs 1 --output_dir " + (dir / "run"));
    INFO(c.args << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.expect));
    CHECK_THAT(r.err, Catch::Contains("hint: "));
    CHECK_FALSE(fs::exists(dir / "run"));
  }
  // Labels that lack a class train once --num_classes says how many there are.
  auto given = run_gputrain("train " + npy + (dir / "x.npy") + " --train_targets " + (dir / "gap.npy") +
                            " --num_classes 3 --epochs 1 --batch_size 2 --output_dir " + (dir / "ok"));
  INFO(given.out << given.err);
  CHECK(given.exit_code == 0);
  CHECK(nlohmann::json::parse(test::read_file(dir / "ok/config.json"))["resolved"]["num_classes"] == 3);
}

TEST_CASE("data cli: a test loss that is not finite is the NaN guard's exit 3, never exit 0", "[data_cli]") {
  test::TempDir dir;
  // Finite values the model overflows on: the training data is ordinary, the test data huge.
  std::vector<double> x, big(16 * 4, 3e38), y;
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 4; ++j) x.push_back(std::sin(i * 4.0 + j));
    y.push_back(x[static_cast<size_t>(i) * 4] > 0);
  }
  write_npy(dir / "xtr.npy", {64, 4}, x, false);
  write_npy(dir / "ytr.npy", {64}, y, true);
  write_npy(dir / "xte.npy", {16, 4}, big, false);
  write_npy(dir / "yte.npy", {16}, std::vector<double>(y.begin(), y.begin() + 16), true);
  auto r = run_gputrain("train --dataset npy --model mlp --train_file " + (dir / "xtr.npy") + " --train_targets " +
                        (dir / "ytr.npy") + " --test_file " + (dir / "xte.npy") + " --test_targets " +
                        (dir / "yte.npy") + " --epochs 2 --batch_size 8 --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("the epoch 1 test loss is not finite"));
  CHECK_FALSE(fs::exists(dir / "run/checkpoints/last.pt"));
}
