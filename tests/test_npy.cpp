// NumPy .npy/.npz reading and NpyDataset, on fixtures written byte by byte here (no Python needed).
#include <zlib.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "data/npy.h"
#include "data/npy_dataset.h"
#include "test_errors.h"
#include "test_util.h"

using namespace gputrain;
using test::error_of;

namespace {

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string npy_with_header(std::string dict, const std::string& data, int version = 1) {
  size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string s = "\x93NUMPY";
  s += static_cast<char>(version);
  s += '\0';
  for (size_t i = 0; i < prefix - 8; ++i) s += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  return s + dict + data;
}

// An .npy image as numpy writes it: magic, version, little-endian header length, the dict padded
// with spaces to a 64-byte boundary and ended by '\n', then the data.
std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data, int version = 1,
                      const std::string& fortran = "False") {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  return npy_with_header(dict, data, version);
}

void put(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += static_cast<char>(i < 8 ? (v >> (8 * i)) & 0xff : 0);
}

std::string raw_deflate(const std::string& in) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

struct Member {
  std::string name, data;
  bool deflate = false;
};

// A zip archive as Python's zipfile writes it (local headers, central directory, end record).
// `zip64` moves sizes and offsets into zip64 extra fields and adds the zip64 end records, as
// np.savez does for big arrays.
std::string zip_bytes(const std::vector<Member>& members, bool zip64 = false) {
  std::string out, cd;
  for (const auto& m : members) {
    std::string body = m.deflate ? raw_deflate(m.data) : m.data;
    uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(m.data.data()), static_cast<uInt>(m.data.size())));
    uint64_t offset = out.size();
    auto header = [&](std::string& s, bool central) {
      put(s, central ? 0x02014b50 : 0x04034b50, 4);
      if (central) put(s, 45, 2);
      put(s, 45, 2);                 // version needed
      put(s, 0, 2);                  // flags
      put(s, m.deflate ? 8 : 0, 2);  // method
      put(s, 0, 4);                  // time, date
      put(s, crc, 4);
      put(s, zip64 ? 0xFFFFFFFF : body.size(), 4);
      put(s, zip64 ? 0xFFFFFFFF : m.data.size(), 4);
      put(s, m.name.size(), 2);
      put(s, zip64 ? 4 + (central ? 24 : 16) : 0, 2);
      if (central) {
        put(s, 0, 2 + 2 + 2 + 4);  // comment length, disk, internal and external attributes
        put(s, zip64 ? 0xFFFFFFFF : offset, 4);
      }
      s += m.name;
      if (zip64) {
        put(s, 1, 2);
        put(s, central ? 24 : 16, 2);
        put(s, m.data.size(), 8);
        put(s, body.size(), 8);
        if (central) put(s, offset, 8);
      }
    };
    header(out, false);
    out += body;
    header(cd, true);
  }
  uint64_t cd_offset = out.size();
  out += cd;
  if (zip64) {
    uint64_t z = out.size();
    put(out, 0x06064b50, 4);
    put(out, 44, 8);
    put(out, 45, 2);
    put(out, 45, 2);
    put(out, 0, 8);  // disk numbers
    put(out, members.size(), 8);
    put(out, members.size(), 8);
    put(out, cd.size(), 8);
    put(out, cd_offset, 8);
    put(out, 0x07064b50, 4);
    put(out, 0, 4);
    put(out, z, 8);
    put(out, 1, 4);
  }
  put(out, 0x06054b50, 4);
  put(out, 0, 4);
  put(out, zip64 ? 0xFFFF : members.size(), 2);
  put(out, zip64 ? 0xFFFF : members.size(), 2);
  put(out, zip64 ? 0xFFFFFFFF : cd.size(), 4);
  put(out, zip64 ? 0xFFFFFFFF : cd_offset, 4);
  put(out, 0, 2);
  return out;
}

std::vector<float> floats(const NpyArray& a) {
  std::vector<float> v(static_cast<size_t>(a.numel));
  a.to_float(0, a.numel, v.data());
  return v;
}

}  // namespace

TEST_CASE("npy: every dtype converts to float", "[npy]") {
  test::TempDir dir;
  std::vector<float> want = {0, 1, 2, 100, 7};
  auto check = [&](const std::string& descr, const std::string& data, NpyDtype type) {
    INFO(descr);
    test::write_file(dir / "a.npy", npy_bytes(descr, "(5,)", data));
    NpyArray a = read_npy(dir / "a.npy");
    CHECK(a.dtype == type);
    CHECK(a.shape == std::vector<int64_t>{5});
    CHECK(a.numel == 5);
    CHECK(floats(a) == want);
    CHECK(a.at(3) == 100.0);
  };
  check("<f4", raw<float>({0, 1, 2, 100, 7}), NpyDtype::f32);
  check("<f8", raw<double>({0, 1, 2, 100, 7}), NpyDtype::f64);
  check("<f2", raw<uint16_t>({0x0000, 0x3C00, 0x4000, 0x5640, 0x4700}), NpyDtype::f16);
  check("|i1", raw<int8_t>({0, 1, 2, 100, 7}), NpyDtype::i8);
  check("<i2", raw<int16_t>({0, 1, 2, 100, 7}), NpyDtype::i16);
  check("<i4", raw<int32_t>({0, 1, 2, 100, 7}), NpyDtype::i32);
  check("<i8", raw<int64_t>({0, 1, 2, 100, 7}), NpyDtype::i64);
  check("|u1", raw<uint8_t>({0, 1, 2, 100, 7}), NpyDtype::u8);
  check("<u2", raw<uint16_t>({0, 1, 2, 100, 7}), NpyDtype::u16);
  check("=u4", raw<uint32_t>({0, 1, 2, 100, 7}), NpyDtype::u32);
  check("<u8", raw<uint64_t>({0, 1, 2, 100, 7}), NpyDtype::u64);
  want = {0, 1, 1, 1, 0};
  test::write_file(dir / "b.npy", npy_bytes("|b1", "(5,)", raw<uint8_t>({0, 1, 1, 1, 0})));
  CHECK(floats(read_npy(dir / "b.npy")) == want);
  CHECK(read_npy(dir / "b.npy").dtype == NpyDtype::b1);

  test::write_file(dir / "neg.npy", npy_bytes("<i8", "(2,)", raw<int64_t>({-3, int64_t{1} << 40})));
  CHECK(read_npy(dir / "neg.npy").at(0) == -3.0);
  CHECK(read_npy(dir / "neg.npy").at(1) == std::ldexp(1.0, 40));
}

TEST_CASE("npy: float16 special values", "[npy]") {
  test::TempDir dir;
  std::vector<uint16_t> bits = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF, 0x0400, 0x7C00, 0xFC00, 0x8000, 0x3555, 0x7E00};
  test::write_file(dir / "h.npy", npy_bytes("<f2", "(11,)", raw(bits)));
  auto v = floats(read_npy(dir / "h.npy"));
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == -2.0f);
  CHECK(v[2] == 65504.0f);
  CHECK(v[3] == std::ldexp(1.0f, -24));         // smallest subnormal
  CHECK(v[4] == 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  CHECK(v[5] == std::ldexp(1.0f, -14));         // smallest normal
  CHECK(v[6] == INFINITY);
  CHECK(v[7] == -INFINITY);
  CHECK((v[8] == 0.0f && std::signbit(v[8])));
  CHECK(v[9] == 0.333251953125f);
  CHECK(std::isnan(v[10]));
}

TEST_CASE("npy: header versions, spacing and shapes", "[npy]") {
  test::TempDir dir;
  std::string data = raw<float>({1, 2, 3, 4, 5, 6});
  for (int version : {1, 2, 3}) {
    test::write_file(dir / "v.npy", npy_bytes("<f4", "(2, 3)", data, version));
    CHECK(read_npy(dir / "v.npy").shape == std::vector<int64_t>{2, 3});
  }
  // Double quotes, no spaces, no trailing comma, a 1-tuple without spaces.
  test::write_file(dir / "tight.npy",
                   npy_with_header("{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(6,)}", data));
  CHECK(floats(read_npy(dir / "tight.npy"))[5] == 6.0f);
  test::write_file(
      dir / "loose.npy",
      npy_with_header("{ 'shape' : ( 1 , 2 , 3 , ) ,  'fortran_order' : False , 'descr' : '<f4' , }", data));
  CHECK(read_npy(dir / "loose.npy").shape == std::vector<int64_t>{1, 2, 3});
  test::write_file(dir / "scalar.npy", npy_bytes("<f8", "()", raw<double>({2.5})));
  NpyArray s = read_npy(dir / "scalar.npy");
  CHECK(s.shape.empty());
  CHECK(s.numel == 1);
  CHECK(s.at(0) == 2.5);
  test::write_file(dir / "empty.npy", npy_bytes("<f4", "(0, 3)", ""));
  CHECK(read_npy(dir / "empty.npy").numel == 0);
}

TEST_CASE("npy dataset: rank-5 float32 x with int64 labels from two .npy files", "[npy]") {
  test::TempDir dir;
  std::vector<float> x(4 * 2 * 8 * 3 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  test::write_file(dir / "x.npy", npy_bytes("<f4", "(4, 2, 8, 3, 3)", raw(x)));
  test::write_file(dir / "y.npy", npy_bytes("<i8", "(4,)", raw<int64_t>({0, 3, 2, 1})));
  auto ds = load_npy_dataset(dir / "x.npy", dir / "y.npy", "train", "auto");
  CHECK(ds->size() == 4);
  CHECK(ds->sample_shape() == std::vector<int64_t>{2, 8, 3, 3});
  CHECK(ds->num_classes() == 4);
  CHECK(load_npy_dataset(dir / "x.npy", dir / "y.npy", "train", "auto", 7)->num_classes() == 7);  // --num_classes
  CHECK(!ds->is_regression());
  std::vector<float> sample(144);
  CHECK(ds->get(2, sample.data(), nullptr, 0) == 2);
  CHECK(sample[0] == x[288]);
  CHECK(sample[143] == x[431]);
  // A rank-1 x is one feature per sample; float labels that are whole numbers classify.
  test::write_file(dir / "x1.npy", npy_bytes("<f8", "(3,)", raw<double>({1, 2, 3})));
  test::write_file(dir / "y1.npy", npy_bytes("<f4", "(3,)", raw<float>({0, 1, 0})));
  auto one = load_npy_dataset(dir / "x1.npy", dir / "y1.npy", "train", "classification");
  CHECK(one->sample_shape() == std::vector<int64_t>{1});
  CHECK(one->num_classes() == 2);
}

TEST_CASE("npz: Keras-style and x/y archives, stored, deflated and zip64", "[npy]") {
  test::TempDir dir;
  std::vector<uint8_t> img(6 * 2 * 2);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint8_t>(i * 9);
  std::string xtr = npy_bytes("|u1", "(6, 2, 2)", raw(img));
  std::string ytr = npy_bytes("|u1", "(6,)", raw<uint8_t>({0, 1, 2, 3, 4, 9}));
  std::string xte = npy_bytes("|u1", "(2, 2, 2)", raw<uint8_t>({1, 2, 3, 4, 5, 6, 7, 8}));
  std::string yte = npy_bytes("|u1", "(2,)", raw<uint8_t>({7, 8}));
  for (int variant = 0; variant < 3; ++variant) {
    INFO("variant " << variant);
    bool deflate = variant == 1, zip64 = variant == 2;
    test::write_file(dir / "mnist.npz", zip_bytes({{"x_train.npy", xtr, deflate},
                                                   {"y_train.npy", ytr, deflate},
                                                   {"x_test.npy", xte, deflate},
                                                   {"y_test.npy", yte, !deflate}},
                                                  zip64));
    CHECK(npz_keys(dir / "mnist.npz") == std::vector<std::string>{"x_train", "y_train", "x_test", "y_test"});
    CHECK(npz_has_split(dir / "mnist.npz", "test"));
    CHECK(!npz_has_split(dir / "mnist.npz", "val"));
    auto all = read_npz(dir / "mnist.npz");
    REQUIRE(all.size() == 4);
    CHECK(all.at("x_train").path == (dir / "mnist.npz") + ":x_train");
    CHECK(all.at("y_test").at(1) == 8.0);
    auto train = load_npy_dataset(dir / "mnist.npz", "", "train", "auto", 10);  // labels 5..8 absent
    CHECK(train->size() == 6);
    CHECK(train->sample_shape() == std::vector<int64_t>{2, 2});
    CHECK(train->num_classes() == 10);
    float s[4];
    CHECK(train->get(5, s, nullptr, 0) == 9);
    CHECK(s[3] == static_cast<float>(img[23]));
    auto test = load_npy_dataset(dir / "mnist.npz", "", "test", "auto", train->num_classes());
    CHECK(test->size() == 2);
    CHECK(test->num_classes() == 10);
  }
  test::write_file(dir / "xy.npz", zip_bytes({{"x.npy", xte, true}, {"y.npy", yte, false}}));
  CHECK(!npz_has_split(dir / "xy.npz", "train"));
  CHECK(load_npy_dataset(dir / "xy.npz", "", "train", "auto", 9)->size() == 2);
}

TEST_CASE("npy dataset: regression targets and task detection", "[npy]") {
  test::TempDir dir;
  test::write_file(dir / "x.npy", npy_bytes("<f4", "(2, 2)", raw<float>({1, 2, 3, 4})));
  test::write_file(dir / "y3.npy", npy_bytes("<f8", "(2, 3)", raw<double>({0.5, -1, 2, 3, 4, 5.25})));
  test::write_file(dir / "yf.npy", npy_bytes("<f4", "(2,)", raw<float>({0.25, 1})));
  test::write_file(dir / "yi.npy", npy_bytes("<i4", "(2,)", raw<int32_t>({3, 1})));
  test::write_file(dir / "yi2.npy", npy_bytes("<i4", "(2, 2)", raw<int32_t>({3, 1, 2, 2})));
  for (const char* task : {"regression", "auto"}) {
    auto ds = load_npy_dataset(dir / "x.npy", dir / "y3.npy", "train", task);
    CHECK(ds->is_regression());
    CHECK(ds->target_shape() == std::vector<int64_t>{3});
    float x[2], t[3];
    CHECK(ds->get(1, x, t, 0) == 0);
    CHECK((x[0] == 3 && x[1] == 4 && t[0] == 3 && t[2] == 5.25f));
  }
  auto yf = load_npy_dataset(dir / "x.npy", dir / "yf.npy", "train", "auto");
  CHECK(yf->is_regression());
  CHECK(yf->target_shape() == std::vector<int64_t>{1});
  auto yi = load_npy_dataset(dir / "x.npy", dir / "yi.npy", "train", "auto", 4);
  CHECK(yi->num_classes() == 4);
  CHECK(load_npy_dataset(dir / "x.npy", dir / "yi.npy", "train", "regression")->is_regression());
  CHECK(load_npy_dataset(dir / "x.npy", dir / "yi2.npy", "train", "auto")->target_shape() == std::vector<int64_t>{2});
}

TEST_CASE("npy: broken files give one clear error each", "[npy]") {
  test::TempDir dir;
  auto npy_error = [&](const std::string& name, const std::string& bytes) {
    test::write_file(dir / name, bytes);
    return error_of(dir / name, [&] { read_npy(dir / name); });
  };
  std::string good = npy_bytes("<f4", "(4, 2)", raw<float>({1, 2, 3, 4, 5, 6, 7, 8}));
  CHECK_THAT(npy_error("trunc.npy", good.substr(0, good.size() - 3)),
             Catch::Contains("truncated: header says 32 bytes, file holds 29"));
  CHECK_THAT(npy_error("short.npy", good.substr(0, 7)), Catch::Contains("truncated"));
  CHECK_THAT(npy_error("headless.npy", good.substr(0, 40)), Catch::Contains("truncated: header length"));
  CHECK_THAT(npy_error("empty.npy", ""), Catch::Contains("truncated"));
  CHECK_THAT(npy_error("extra.npy", good + "x"), Catch::Contains("trailing bytes"));
  CHECK_THAT(npy_error("magic.npy", "\x93NUMPZ" + good.substr(6)), Catch::Contains("bad magic"));
  CHECK_THAT(npy_error("version.npy", good.substr(0, 6) + "\x04" + good.substr(7)), Catch::Contains("version 4.0"));
  CHECK_THAT(npy_error("c8.npy", npy_bytes("<c8", "(1,)", raw<float>({1, 2}))), Catch::Contains("'<c8' (complex"));
  CHECK_THAT(npy_error("obj.npy", npy_bytes("|O", "(1,)", raw<uint64_t>({0}))),
             Catch::Contains("'|O' (Python objects"));
  CHECK_THAT(npy_error("str.npy", npy_bytes("<U3", "(1,)", std::string(12, 'a'))), Catch::Contains("strings"));
  CHECK_THAT(npy_error("be.npy", npy_bytes(">f4", "(1,)", raw<float>({1}))), Catch::Contains("'>f4': big-endian"));
  CHECK_THAT(npy_error("fortran.npy", npy_bytes("<f4", "(4, 2)", raw<float>({1, 2, 3, 4, 5, 6, 7, 8}), 1, "True")),
             Catch::Contains("fortran_order True"));
  CHECK_THAT(npy_error("absurd.npy", npy_bytes("<f4", "(1099511627776, 1099511627776)", good)),
             Catch::Contains("absurd shape (1099511627776, 1099511627776)"));
  CHECK_THAT(npy_error("digits.npy", npy_bytes("<f4", "(99999999999999999999,)", good)),
             Catch::Contains("absurd shape"));
  std::string rank40 = "(1";
  for (int i = 1; i < 40; ++i) rank40 += ", 1";
  CHECK_THAT(npy_error("rank.npy", npy_bytes("<f4", rank40 + ")", raw<float>({1}))),
             Catch::Contains("absurd shape: more than 32 dimensions"));
  CHECK_THAT(npy_error("liar.npy", npy_bytes("<f4", "(1073741824,)", raw<float>({1, 2}))),
             Catch::Contains("truncated: header says 4294967296 bytes, file holds 8"));
  CHECK_THAT(npy_error("key.npy", npy_with_header("{'descr': '<f4', 'fortran_order': False}", "")),
             Catch::Contains("missing key 'shape'"));
  CHECK_THAT(
      npy_error("junk.npy", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", "abcd")),
      Catch::Contains("malformed header"));
  CHECK_THAT(npy_error("struct.npy",
                       npy_with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "abcd")),
             Catch::Contains("structured"));
  CHECK_THAT(npy_error("zip.npy", zip_bytes({{"x.npy", good}})), Catch::Contains("zip archive"));
  CHECK_THAT(error_of(dir / "missing.npy", [&] { read_npy(dir / "missing.npy"); }), Catch::Contains("cannot open"));
}

TEST_CASE("npz: broken archives give one clear error each", "[npy]") {
  test::TempDir dir;
  std::string x = npy_bytes("<f4", "(2, 2)", raw<float>({1, 2, 3, 4}));
  std::string y = npy_bytes("<i8", "(2,)", raw<int64_t>({0, 1}));
  auto npz_error = [&](const std::string& name, const std::string& bytes) {
    test::write_file(dir / name, bytes);
    return error_of(dir / name, [&] { read_npz(dir / name); });
  };
  std::string stored = zip_bytes({{"x.npy", x}, {"y.npy", y}});
  // The first central directory entry's local header offset, moved past the end of the file.
  std::string past = stored;
  size_t cd = past.find("PK\x01\x02");
  past.replace(cd + 42, 4, std::string("\xff\xff\xff\x7f", 4));
  CHECK_THAT(npz_error("past.npz", past), Catch::Contains("local header offset 2147483647 is past the end"));
  CHECK_THAT(npz_error("cut.npz", stored.substr(0, stored.size() - 30)),
             Catch::Contains("bad magic: not a zip archive"));
  CHECK_THAT(npz_error("npy.npz", x), Catch::Contains("an .npy file, not an .npz"));
  CHECK_THAT(npz_error("tiny.npz", "PK"), Catch::Contains("truncated"));
  // A member whose stored data says more than the npy header promises.
  CHECK_THAT(npz_error("member.npz", zip_bytes({{"x.npy", x.substr(0, x.size() - 4)}})),
             Catch::Contains(":x: truncated: header says 16 bytes, file holds 12"));

  std::string deflated = zip_bytes({{"x.npy", x, true}});
  std::string corrupt = deflated;
  corrupt[30 + 5] = '\xff';  // first byte of the deflate stream: block type 3 is invalid
  CHECK_THAT(npz_error("corrupt.npz", corrupt), Catch::Contains("corrupt deflate stream"));
  // Declared uncompressed size (central directory, offset 24) larger than the stream.
  std::string liar = deflated;
  size_t lcd = liar.find("PK\x01\x02");
  liar.replace(lcd + 24, 4, std::string("\x00\x00\x00\x40", 4));
  CHECK_THAT(npz_error("liar.npz", liar), Catch::Contains("cannot inflate to the declared 1073741824"));
  std::string shorter = deflated;
  shorter.replace(lcd + 24, 4, std::string("\x10\x00\x00\x00", 4));
  CHECK_THAT(npz_error("short.npz", shorter), Catch::Contains("more than the declared 16 bytes"));

  test::write_file(dir / "keras.npz", zip_bytes({{"x_train.npy", x}, {"y_train.npy", y}}));
  std::string msg = error_of(dir / "keras.npz", [&] { load_npy_dataset(dir / "keras.npz", "", "test", "auto"); });
  CHECK_THAT(msg, Catch::Contains("no arrays 'x_test' and 'y_test'"));
  CHECK_THAT(msg, Catch::Contains("the archive holds: x_train, y_train"));
  error_of(dir / "y.npy", [&] { load_npy_dataset(dir / "keras.npz", dir / "y.npy", "train", "auto"); });
}

TEST_CASE("npy dataset: arrays that do not fit give one clear error each", "[npy]") {
  test::TempDir dir;
  test::write_file(dir / "x.npy", npy_bytes("<f4", "(3, 2)", raw<float>({1, 2, 3, 4, 5, 6})));
  test::write_file(dir / "y2.npy", npy_bytes("<i8", "(2,)", raw<int64_t>({0, 1})));
  test::write_file(dir / "neg.npy", npy_bytes("<i4", "(3,)", raw<int32_t>({0, -1, 1})));
  test::write_file(dir / "frac.npy", npy_bytes("<f4", "(3,)", raw<float>({0, 1.5f, 1})));
  test::write_file(dir / "big.npy", npy_bytes("<u4", "(3,)", raw<uint32_t>({0, 1, 5000000})));
  test::write_file(dir / "y3x2.npy", npy_bytes("<i8", "(3, 2)", raw<int64_t>({0, 1, 0, 1, 0, 1})));
  test::write_file(dir / "y.npy", npy_bytes("<i8", "(3,)", raw<int64_t>({0, 1, 0})));
  auto load = [&](const std::string& y, const std::string& task = "classification") {
    return [&dir, y, task] { load_npy_dataset(dir / "x.npy", y.empty() ? "" : dir / y, "train", task); };
  };
  std::string msg = error_of(dir / "y2.npy", load("y2.npy"));
  CHECK_THAT(msg, Catch::Contains("x.npy has 3 samples but"));
  CHECK_THAT(msg, Catch::Contains("has 2"));
  CHECK_THAT(error_of(dir / "neg.npy", load("neg.npy")), Catch::Contains("label -1 at index 1 is negative"));
  CHECK_THAT(error_of(dir / "frac.npy", load("frac.npy")), Catch::Contains("label 1.5 at index 1 is not a whole number"));
  CHECK_THAT(error_of(dir / "big.npy", load("big.npy")), Catch::Contains("label 5000000 at index 2 is 1000000 or more"));
  CHECK_THAT(error_of(dir / "y3x2.npy", load("y3x2.npy")), Catch::Contains("must be 1-D"));
  CHECK_THAT(error_of(dir / "y.npy", load("y.npy", "clustering")), Catch::Contains("unknown task 'clustering'"));
  CHECK_THAT(error_of(dir / "x.npy", load("")), Catch::Contains("needs a y file"));
  CHECK_THAT(error_of(dir / "x.csv", [&] { load_npy_dataset(dir / "x.csv", "", "train", "auto"); }),
             Catch::Contains("not a NumPy file"));
}

TEST_CASE("npy dataset: labels that cannot be a class count, and NaN or inf values, are named at load", "[npy]") {
  test::TempDir dir;
  test::write_file(dir / "x.npy", npy_bytes("<f4", "(3, 2)", raw<float>({1, 2, 3, 4, 5, 6})));
  test::write_file(dir / "gap.npy", npy_bytes("<i8", "(3,)", raw<int64_t>({0, 2, 0})));
  test::write_file(dir / "one.npy", npy_bytes("<i8", "(3,)", raw<int64_t>({0, 0, 0})));
  test::write_file(dir / "wide.npy", npy_bytes("<u1", "(3,)", raw<uint8_t>({0, 200, 1})));
  auto load = [&](const std::string& x, const std::string& y, int64_t classes = 0,
                  const std::string& task = "auto") {
    return [=, &dir] { load_npy_dataset(dir / x, dir / y, "train", task, classes); };
  };
  std::string gap = error_of(dir / "gap.npy", load("x.npy", "gap.npy"));
  CHECK_THAT(gap, Catch::Contains("labels run 0..2 but 1 of these 3 classes have no sample (first: 1)"));
  CHECK(load_npy_dataset(dir / "x.npy", dir / "gap.npy", "train", "auto", 3)->num_classes() == 3);  // given: fine
  CHECK_THAT(error_of(dir / "one.npy", load("x.npy", "one.npy")), Catch::Contains("one class only"));
  std::string wide = error_of(dir / "wide.npy", load("x.npy", "wide.npy", 10));
  CHECK_THAT(wide, Catch::Contains("label 200 at index 1 is outside 0..9 (10 classes)"));

  test::write_file(dir / "xnan.npy", npy_bytes("<f8", "(3, 2)", raw<double>({1, NAN, 3, INFINITY, 5, NAN})));
  test::write_file(dir / "xbig.npy", npy_bytes("<f8", "(3, 2)", raw<double>({1, 2, 3, 4, 1e300, 6})));
  test::write_file(dir / "y.npy", npy_bytes("<i8", "(3,)", raw<int64_t>({0, 1, 0})));
  test::write_file(dir / "yinf.npy", npy_bytes("<f4", "(3,)", raw<float>({0.5f, -INFINITY, 1})));
  CHECK_THAT(error_of(dir / "xnan.npy", load("xnan.npy", "y.npy")),
             Catch::Contains("3 feature values are NaN or infinite as float32 (first at flat index 1)"));
  CHECK_THAT(error_of(dir / "xbig.npy", load("xbig.npy", "y.npy")), Catch::Contains("1 feature value is"));
  CHECK_THAT(error_of(dir / "yinf.npy", load("x.npy", "yinf.npy", 0, "regression")),
             Catch::Contains("1 target value is NaN or infinite"));
}
