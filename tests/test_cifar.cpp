// CIFAR-10/100 binary batches, on fixtures generated here.
#include <catch2/catch.hpp>

#include <filesystem>

#include "data/cifar.h"
#include "test_errors.h"
#include "test_util.h"

using namespace gputrain;
using test::error_of;
namespace fs = std::filesystem;

namespace {

uint8_t cifar_pixel(int record, int i) { return static_cast<uint8_t>(record * 31 + i * 7); }

// `labels` per record; CIFAR-100 records get coarse label = fine / 5.
std::string cifar_bytes(const std::vector<int>& labels, bool hundred, int first_record = 0) {
  std::string s;
  for (size_t r = 0; r < labels.size(); ++r) {
    if (hundred) s += static_cast<char>(labels[r] / 5);
    s += static_cast<char>(labels[r]);
    for (int i = 0; i < 3072; ++i) s += static_cast<char>(cifar_pixel(first_record + static_cast<int>(r), i));
  }
  return s;
}

void write_cifar10(const std::string& dir) {
  fs::create_directories(dir);
  for (int b = 1; b <= 5; ++b)
    test::write_file(dir + "/data_batch_" + std::to_string(b) + ".bin", cifar_bytes({b, b + 1}, false, 2 * (b - 1)));
  test::write_file(dir + "/test_batch.bin", cifar_bytes({9, 0, 3}, false));
}

}  // namespace

TEST_CASE("CIFAR-10: values, labels and shape of train and test", "[cifar]") {
  test::TempDir dir;
  write_cifar10(dir / "c10");
  auto train = load_cifar_split(dir / "c10", 10, true);
  REQUIRE(train->size() == 10);
  CHECK(train->sample_shape() == std::vector<int64_t>{3, 32, 32});
  CHECK(train->num_classes() == 10);
  std::vector<float> x(3072);
  for (int r = 0; r < 10; ++r) {
    CHECK(train->get(r, x.data(), nullptr, 0) == r / 2 + 1 + r % 2);
    for (int i : {0, 1, 1023, 1024, 2048, 3071}) CHECK(x[i] == Approx(cifar_pixel(r, i) / 255.0f));
  }
  auto test = load_cifar_split(dir / "c10", 10, false);
  REQUIRE(test->size() == 3);
  CHECK(test->get(0, x.data(), nullptr, 0) == 9);
  CHECK(test->get(2, x.data(), nullptr, 0) == 3);
  CHECK(x[5] == Approx(cifar_pixel(2, 5) / 255.0f));
}

TEST_CASE("CIFAR: the tarball's subfolder is found, CIFAR-100 uses fine labels", "[cifar]") {
  test::TempDir dir;
  write_cifar10(dir / "cifar-10-batches-bin");
  CHECK(load_cifar_split(dir.path.string(), 10, true)->size() == 10);

  fs::create_directories(dir / "cifar-100-binary");
  test::write_file(dir / "cifar-100-binary/train.bin", cifar_bytes({99, 42, 7, 0}, true));
  test::write_file(dir / "cifar-100-binary/test.bin", cifar_bytes({13}, true));
  auto c100 = load_cifar_split(dir.path.string(), 100, true);
  REQUIRE(c100->size() == 4);
  CHECK(c100->num_classes() == 100);
  std::vector<float> x(3072);
  CHECK(c100->get(0, x.data(), nullptr, 0) == 99);
  CHECK(c100->get(1, x.data(), nullptr, 0) == 42);
  CHECK(c100->get(2, x.data(), nullptr, 0) == 7);
  CHECK(x[3071] == Approx(cifar_pixel(2, 3071) / 255.0f));
  CHECK(load_cifar_split(dir / "cifar-100-binary", 100, false)->size() == 1);
}

TEST_CASE("CIFAR: missing, truncated and mislabelled files are named", "[cifar]") {
  test::TempDir dir;
  write_cifar10(dir / "c10");
  fs::remove(dir / "c10/data_batch_4.bin");
  auto msg = error_of([&] { load_cifar_split(dir / "c10", 10, true); });
  CHECK_THAT(msg, Catch::Contains("data_batch_4.bin") && Catch::Contains(dir / "c10"));
  try {
    load_cifar_split(dir / "c10", 10, true);
  } catch (const Error& e) {
    CHECK_THAT(e.hint, Catch::Contains("cifar-10-binary.tar.gz") && Catch::Contains("--data_dir"));
  }
  CHECK(load_cifar_split(dir / "c10", 10, false)->size() == 3);  // the test split is still complete

  write_cifar10(dir / "trunc");
  std::string good = cifar_bytes({1, 2}, false);
  test::write_file(dir / "trunc/data_batch_3.bin", good.substr(0, good.size() - 100));
  msg = error_of([&] { load_cifar_split(dir / "trunc", 10, true); });
  CHECK_THAT(msg, Catch::Contains("data_batch_3.bin") &&
                      Catch::Contains(std::to_string(good.size() - 100) + " bytes is not a multiple of 3073"));

  write_cifar10(dir / "label");
  test::write_file(dir / "label/test_batch.bin", cifar_bytes({1, 2, 10}, false));
  msg = error_of([&] { load_cifar_split(dir / "label", 10, false); });
  CHECK_THAT(msg, Catch::Contains("test_batch.bin") && Catch::Contains("record 2") && Catch::Contains("label 10"));

  fs::create_directories(dir / "c100");
  test::write_file(dir / "c100/train.bin", cifar_bytes({5, 100}, true));
  msg = error_of([&] { load_cifar_split(dir / "c100", 100, true); });
  CHECK_THAT(msg, Catch::Contains("train.bin") && Catch::Contains("record 1"));
  test::write_file(dir / "c100/test.bin", cifar_bytes({5}, false));  // a CIFAR-10 record
  msg = error_of([&] { load_cifar_split(dir / "c100", 100, false); });
  CHECK_THAT(msg, Catch::Contains("not a multiple of 3074"));
}

// ------------------------------------------------------------------------------ decode, resize
