// NumPy .npy arrays, memory-mapped and checked before anything is allocated (.npz is in npz.cpp).
#include "data/npy.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace gputrain {

// Element bytes are reinterpreted in place; '=' (native) is read as little-endian.
static_assert(std::endian::native == std::endian::little, "gputrain reads .npy data as little-endian");

namespace {

// Far more than any real array (256 TiB); a header promising more is corrupt or hostile, and the
// limit keeps every size computation below from overflowing.
constexpr uint64_t kMaxBytes = uint64_t{1} << 48;
constexpr size_t kMaxRank = 32;
const char* const kSaveHint = "write arrays with numpy.save / numpy.savez (numeric dtype, little-endian, C order)";

[[noreturn]] void fail(const std::string& where, const std::string& why, const std::string& hint = kSaveHint) {
  throw usage_error(where + ": " + why, hint);
}

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t rd32(const uint8_t* p) { return rd16(p) | (uint32_t{rd16(p + 2)} << 16); }

// The header dictionary, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
// Only Python literals numpy writes are accepted; spacing and trailing commas are tolerated.
class HeaderParser {
 public:
  HeaderParser(const std::string& where, const char* p, const char* end) : where_(where), p_(p), end_(end), begin_(p) {}

  void parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape) {
    bool seen[3] = {false, false, false};
    ws();
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') break;
      std::string key = string_literal();
      ws();
      expect(':');
      ws();
      int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (k < 0) bad("unexpected key '" + key + "'");
      if (seen[k]) bad("duplicate key '" + key + "'");
      seen[k] = true;
      if (k == 0) {
        if (peek() == '[')
          fail(where_, "unsupported dtype: structured (record) arrays are not supported",
               "save each field as its own numeric array");
        descr = string_literal();
      } else if (k == 1) {
        fortran = boolean();
      } else {
        shape = tuple();
      }
      ws();
      if (peek() == ',') {
        ++p_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}'");
      break;
    }
    ++p_;  // the '}'
    ws();
    if (p_ != end_) bad("unexpected characters after the dictionary");
    for (int k = 0; k < 3; ++k)
      if (!seen[k]) bad(std::string("missing key '") + (k == 0 ? "descr" : k == 1 ? "fortran_order" : "shape") + "'");
  }

 private:
  [[noreturn]] void bad(const std::string& what) {
    // Quote the header so the file can be diagnosed, printable characters only, bounded length.
    const char* end = end_;
    while (end > begin_ && (end[-1] == ' ' || end[-1] == '\n')) --end;  // numpy's padding
    std::string text;
    for (const char* q = begin_; q < end && text.size() < 80; ++q) text += (*q >= 32 && *q < 127) ? *q : '?';
    fail(where_, "malformed header: " + what + " in \"" + text + "\"");
  }
  char peek() const { return p_ < end_ ? *p_ : '\0'; }
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  void expect(char c) {
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++p_;
  }
  std::string string_literal() {
    char quote = peek();
    if (quote != '\'' && quote != '"') bad("expected a quoted string");
    const char* start = ++p_;
    while (p_ < end_ && *p_ != quote && *p_ != '\\') ++p_;
    if (peek() != quote) bad("unterminated or escaped string");
    return std::string(start, p_++);
  }
  bool boolean() {
    for (const char* word : {"True", "False"}) {
      size_t n = std::strlen(word);
      if (static_cast<size_t>(end_ - p_) >= n && std::memcmp(p_, word, n) == 0) {
        p_ += n;
        return word[0] == 'T';
      }
    }
    bad("fortran_order must be True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    while (true) {
      ws();
      if (peek() == ')') break;
      if (dims.size() >= kMaxRank) fail(where_, fmt::format("absurd shape: more than {} dimensions", kMaxRank));
      if (peek() < '0' || peek() > '9') bad("shape must hold non-negative integers");
      int64_t d = 0;
      int digits = 0;
      for (; peek() >= '0' && peek() <= '9'; ++p_)
        if (++digits > 18)
          fail(where_, "absurd shape: a dimension has more than 18 digits");
        else
          d = d * 10 + (*p_ - '0');
      if (peek() == 'L') ++p_;  // Python 2 numpy wrote long integers as 3L
      dims.push_back(d);
      ws();
      if (peek() == ',')
        ++p_;
      else if (peek() != ')')
        bad("expected ',' or ')' in shape");
    }
    ++p_;
    return dims;
  }

  const std::string& where_;
  const char* p_;
  const char* end_;
  const char* begin_;
};

NpyDtype parse_descr(const std::string& where, const std::string& descr) {
  static const struct {
    const char* code;
    NpyDtype type;
  } kTypes[] = {{"f2", NpyDtype::f16}, {"f4", NpyDtype::f32}, {"f8", NpyDtype::f64}, {"i1", NpyDtype::i8},
                {"i2", NpyDtype::i16}, {"i4", NpyDtype::i32}, {"i8", NpyDtype::i64}, {"u1", NpyDtype::u8},
                {"u2", NpyDtype::u16}, {"u4", NpyDtype::u32}, {"u8", NpyDtype::u64}, {"b1", NpyDtype::b1}};
  const std::string numeric_hint =
      "save a numeric array, e.g. labels as integers via np.unique(y, return_inverse=True)";
  char order = descr.empty() ? '?' : descr[0];
  std::string code = descr.size() > 1 ? descr.substr(1) : "";
  char kind = code.empty() ? '?' : code[0];
  if (std::string("<>|=").find(order) == std::string::npos)
    fail(where, "unsupported dtype '" + descr + "' (no byte-order character)", numeric_hint);
  for (const auto& t : kTypes) {
    if (code != t.code) continue;
    // A single byte has no byte order, so '>u1' is as good as '|u1'.
    if (order == '>' && npy_dtype_size(t.type) > 1)
      fail(where, "unsupported dtype '" + descr + "': big-endian data",
           "convert to little-endian: np.save(path, arr.astype(arr.dtype.newbyteorder('<')))");
    return t.type;
  }
  const char* what = kind == 'c'                                 ? "complex numbers"
                     : kind == 'O'                               ? "Python objects"
                     : kind == 'U' || kind == 'S' || kind == 'a' ? "strings"
                     : kind == 'V'                               ? "raw or structured records"
                     : kind == 'M' || kind == 'm'                ? "dates or time deltas"
                                                                 : "an element type gputrain does not read";
  fail(where,
       "unsupported dtype '" + descr + "' (" + what + "; gputrain reads float16/32/64, int8-64, uint8-64 and bool)",
       kind == 'c' ? "save the real and imaginary parts as separate float arrays (arr.real, arr.imag)" : numeric_hint);
}

template <class T>
void convert(const uint8_t* src, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));  // may be unaligned
    out[i] = static_cast<float>(v);
  }
}

// IEEE half to single by bit manipulation (no F16C dependence), subnormals, inf and NaN included.
float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t{h & 0x8000u} << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: shift the mantissa up until it has its leading 1, lowering the exponent
    uint32_t e = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

const char* npy_dtype_name(NpyDtype t) {
  static const char* const kNames[] = {"float16", "float32", "float64", "int8",   "int16",  "int32",
                                       "int64",   "uint8",   "uint16",  "uint32", "uint64", "bool"};
  return kNames[static_cast<int>(t)];
}

int npy_dtype_size(NpyDtype t) {
  static const int kSizes[] = {2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1};
  return kSizes[static_cast<int>(t)];
}

bool npy_dtype_is_integer(NpyDtype t) { return t != NpyDtype::f16 && t != NpyDtype::f32 && t != NpyDtype::f64; }

NpyArray NpyArray::parse(const std::string& path, std::shared_ptr<const void> owner, const uint8_t* data,
                         uint64_t size) {
  if (size < 10) fail(path, fmt::format("truncated: {} bytes is too short for an .npy header", size));
  if (std::memcmp(data, "\x93NUMPY", 6) != 0) fail(path, "bad magic (not an .npy file; it must start with \\x93NUMPY)");
  int major = data[6], minor = data[7];
  if (major < 1 || major > 3 || minor != 0)
    fail(path, fmt::format("unsupported .npy format version {}.{} (gputrain reads 1.0, 2.0 and 3.0)", major, minor));
  uint64_t prefix = major == 1 ? 10 : 12;
  if (size < prefix) fail(path, "truncated: the file ends inside the .npy header");
  uint64_t header_len = major == 1 ? rd16(data + 8) : rd32(data + 8);
  if (header_len > size - prefix)
    fail(path, fmt::format("truncated: header length {} runs past the end of the file ({} bytes)", header_len, size));

  NpyArray a;
  a.path = path;
  bool fortran = false;
  const char* text = reinterpret_cast<const char*>(data + prefix);
  HeaderParser(path, text, text + header_len).parse(a.descr, fortran, a.shape);
  a.dtype = parse_descr(path, a.descr);
  if (fortran)
    fail(path, "fortran_order True is not supported (column-major data)",
         "save a C-order copy: np.save(path, np.ascontiguousarray(arr))");

  // Checked before multiplying, so neither the count nor the byte size can overflow.
  uint64_t item = static_cast<uint64_t>(npy_dtype_size(a.dtype)), count = 1;
  for (int64_t d : a.shape) {
    if (d != 0 && count > kMaxBytes / item / static_cast<uint64_t>(d))
      fail(path,
           fmt::format("absurd shape ({}): more than 256 TiB of data (corrupt header?)", fmt::join(a.shape, ", ")));
    count *= static_cast<uint64_t>(d);
  }
  uint64_t need = count * item, have = size - prefix - header_len;
  if (need > have) fail(path, fmt::format("truncated: header says {} bytes, file holds {}", need, have));
  if (need < have) fail(path, fmt::format("trailing bytes: header says {} bytes, file holds {}", need, have));
  a.numel = static_cast<int64_t>(count);
  a.owner_ = std::move(owner);
  a.data_ = data + prefix + header_len;
  return a;
}

void NpyArray::to_float(int64_t first, int64_t count, float* out) const {
  if (first < 0 || count < 0 || first > numel - count)
    throw runtime_error(
        fmt::format("{}: elements [{}, {}) are out of range (the array has {})", path, first, first + count, numel));
  const uint8_t* s = data_ + first * npy_dtype_size(dtype);
  switch (dtype) {
    case NpyDtype::f16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        out[i] = half_to_float(h);
      }
      return;
    case NpyDtype::f32:
      std::memcpy(out, s, static_cast<size_t>(count) * 4);
      return;
    case NpyDtype::f64:
      return convert<double>(s, count, out);
    case NpyDtype::i8:
      return convert<int8_t>(s, count, out);
    case NpyDtype::i16:
      return convert<int16_t>(s, count, out);
    case NpyDtype::i32:
      return convert<int32_t>(s, count, out);
    case NpyDtype::i64:
      return convert<int64_t>(s, count, out);
    case NpyDtype::u8:
      return convert<uint8_t>(s, count, out);
    case NpyDtype::u16:
      return convert<uint16_t>(s, count, out);
    case NpyDtype::u32:
      return convert<uint32_t>(s, count, out);
    case NpyDtype::u64:
      return convert<uint64_t>(s, count, out);
    case NpyDtype::b1:
      for (int64_t i = 0; i < count; ++i) out[i] = s[i] != 0 ? 1.0f : 0.0f;
      return;
  }
}

double NpyArray::at(int64_t i) const {
  if (i < 0 || i >= numel)
    throw runtime_error(fmt::format("{}: element {} is out of range (the array has {})", path, i, numel));
  const uint8_t* s = data_ + i * npy_dtype_size(dtype);
  auto load = [s](auto v) {
    std::memcpy(&v, s, sizeof v);
    return static_cast<double>(v);
  };
  switch (dtype) {
    case NpyDtype::f16: {
      uint16_t h;
      std::memcpy(&h, s, 2);
      return half_to_float(h);
    }
    case NpyDtype::f32:
      return load(float{});
    case NpyDtype::f64:
      return load(double{});
    case NpyDtype::i8:
      return load(int8_t{});
    case NpyDtype::i16:
      return load(int16_t{});
    case NpyDtype::i32:
      return load(int32_t{});
    case NpyDtype::i64:
      return load(int64_t{});
    case NpyDtype::u8:
      return load(uint8_t{});
    case NpyDtype::u16:
      return load(uint16_t{});
    case NpyDtype::u32:
      return load(uint32_t{});
    case NpyDtype::u64:
      return load(uint64_t{});
    case NpyDtype::b1:
      return s[0] != 0 ? 1.0 : 0.0;
  }
  return 0;
}

NpyArray read_npy(const std::string& path) {
  MappedFile m = map_file(path);
  if (m.size >= 4 && std::memcmp(m.data, "PK\x03\x04", 4) == 0)
    fail(path, "bad magic: this is a zip archive (.npz), not an .npy file", "name it .npz");
  return NpyArray::parse(path, m.owner, m.data, m.size);
}

}  // namespace gputrain
