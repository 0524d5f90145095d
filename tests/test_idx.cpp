// IDX parsing: good raw and gzip files, and every kind of broken file, on generated fixtures.
#include <zlib.h>
#include <catch2/catch.hpp>

#include <chrono>

#include "core/error.h"
#include "data/idx.h"
#include "data/idx_dataset.h"
#include "test_util.h"

using namespace gputrain;

namespace {

std::string idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data, uint8_t type = 0x08) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) s += static_cast<char>((d >> shift) & 0xff);
  s.append(data.begin(), data.end());
  return s;
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7);
  return v;
}

std::string error_of(const std::string& path) {
  try {
    read_idx(path);
  } catch (const Error& e) {
    CHECK(e.exit_code == 2);
    CHECK_THAT(e.problems[0], Catch::Contains(path));
    return e.problems[0];
  }
  return "";
}

}  // namespace

TEST_CASE("IDX: a raw file and a gzip file read the same", "[idx]") {
  test::TempDir dir;
  auto data = ramp(3 * 4 * 5);
  test::write_file(dir / "a.idx", idx_bytes({3, 4, 5}, data));
  write_gz(dir / "a.idx.gz", idx_bytes({3, 4, 5}, data));
  for (auto name : {"a.idx", "a.idx.gz"}) {
    IdxArray a = read_idx(dir / name);
    CHECK(a.dims == std::vector<int64_t>{3, 4, 5});
    CHECK(a.data == data);
  }
}

TEST_CASE("IDX: broken files give one clear error each", "[idx]") {
  test::TempDir dir;
  std::string good = idx_bytes({10, 4, 4}, ramp(160));

  test::write_file(dir / "trunc", good.substr(0, good.size() - 5));
  CHECK_THAT(error_of(dir / "trunc"), Catch::Contains("truncated"));
  write_gz(dir / "trunc.gz", good.substr(0, good.size() - 5));
  CHECK_THAT(error_of(dir / "trunc.gz"), Catch::Contains("truncated"));
  test::write_file(dir / "short-header", good.substr(0, 6));
  CHECK_THAT(error_of(dir / "short-header"), Catch::Contains("truncated"));

  test::write_file(dir / "magic", "\x12\x34" + good.substr(2));
  CHECK_THAT(error_of(dir / "magic"), Catch::Contains("bad magic"));
  test::write_file(dir / "float", idx_bytes({2}, {0, 0, 0, 0, 0, 0, 0, 0}, 0x0D));
  CHECK_THAT(error_of(dir / "float"), Catch::Contains("unsupported element type 0x0d"));
  test::write_file(dir / "extra", good + "xx");
  CHECK_THAT(error_of(dir / "extra"), Catch::Contains("trailing bytes"));
  CHECK_THAT(error_of(dir / "missing"), Catch::Contains("cannot open"));
  test::write_file(dir / "zero", idx_bytes({0, 4}, {}));
  CHECK_THAT(error_of(dir / "zero"), Catch::Contains("dimension 0 is 0"));
}

TEST_CASE("IDX: absurd header dimensions are rejected before allocating from them", "[idx]") {
  test::TempDir dir;
  // 4 billion x 4 billion bytes: must fail at once, not try to allocate.
  test::write_file(dir / "huge", idx_bytes({0xFFFFFFFFu, 0xFFFFFFFFu}, ramp(16)));
  CHECK_THAT(error_of(dir / "huge"), Catch::Contains("absurd header"));
  // Plausible but false: 1 GiB promised, 16 bytes present. Must report truncation quickly
  // without committing the promised memory up front.
  test::write_file(dir / "liar", idx_bytes({1u << 30}, ramp(16)));
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THAT(error_of(dir / "liar"), Catch::Contains("truncated"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("IDX dataset: images and labels must agree", "[idx]") {
  auto images = [](int64_t n) { return IdxArray{{n, 2, 2}, ramp(static_cast<size_t>(n * 4))}; };
  auto labels = [](int64_t n) { return IdxArray{{n}, std::vector<uint8_t>(static_cast<size_t>(n), 3)}; };
  IdxDataset ok(images(5), labels(5), "fixture");
  CHECK(ok.size() == 5);
  CHECK(ok.sample_shape() == std::vector<int64_t>{1, 2, 2});
  float out[4];
  CHECK(ok.get(1, out, nullptr, 0) == 3);
  CHECK(out[0] == Approx(ramp(8)[4] / 255.0f));

  try {
    IdxDataset bad(images(5), labels(4), "fixture");
    FAIL("expected a count mismatch error");
  } catch (const Error& e) {
    CHECK_THAT(e.problems[0], Catch::Contains("5 images but 4 labels"));
  }
}

TEST_CASE("IDX dataset: a missing dataset folder gives the install hint", "[idx]") {
  try {
    load_idx_split("/nonexistent/fashion", "train", "fashion-mnist");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.exit_code == 2);
    CHECK_THAT(e.problems[0], Catch::Contains("train-images-idx3-ubyte"));
    CHECK_THAT(e.hint, Catch::Contains("apt-get install dataset-fashion-mnist"));
  }
}
