// Token files (token_shard.h): the format from the header, checked against the file's size.
#include "data/token_shard.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "data/npy.h"

namespace gputrain {
namespace {

// llm.c's shard header (dev/data/data_common.py writes it): 256 little-endian int32, [0] the
// magic, [1] the version, [2] the token count. Version 1 holds uint16 tokens (GPT-2's 50257
// fit), version 7 uint32 (Llama 3's 128256 do not).
constexpr int64_t kHeaderBytes = 256 * 4;
constexpr int32_t kMagicU16 = 20240520, kMagicU32 = 20240801;

int32_t header_word(const uint8_t* p, int i) {
  int32_t v;
  std::memcpy(&v, p + 4 * i, 4);
  return v;
}

Error shard_error(const std::string& path, const std::string& what, const std::string& hint) {
  return usage_error(path + ": " + what, hint);
}

TokenShard from_npy(const std::string& path) {
  TokenShard s;
  s.file = map_file(path);
  const NpyArray a = NpyArray::parse(path, s.file.owner, s.file.data, s.file.size);
  if (a.shape.size() != 1 || !a.is_integer() || a.dtype == NpyDtype::b1 || a.dtype == NpyDtype::u64)
    throw shard_error(path, fmt::format("a {} array of shape [{}] is not a list of tokens", npy_dtype_name(a.dtype),
                                        fmt::join(a.shape, ", ")),
                      "a token .npy is 1-D integers (uint16, int32, uint32, int64), as np.save(f, tokens) writes");
  s.path = path;
  s.format = std::string("npy ") + npy_dtype_name(a.dtype);
  s.count = a.numel;
  s.width = npy_dtype_size(a.dtype);
  s.is_signed = a.dtype == NpyDtype::i8 || a.dtype == NpyDtype::i16 || a.dtype == NpyDtype::i32 || a.dtype == NpyDtype::i64;
  s.tokens = a.bytes();  // inside s.file's mapping
  return s;
}

}  // namespace

void TokenShard::read(int64_t first, int64_t n, int64_t* out) const {
  const uint8_t* p = tokens + first * width;
  switch (width) {
    case 1:
      for (int64_t i = 0; i < n; ++i) out[i] = is_signed ? static_cast<int8_t>(p[i]) : p[i];
      break;
    case 2:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = is_signed ? static_cast<int16_t>(v) : v;
      }
      break;
    case 4:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = is_signed ? static_cast<int32_t>(v) : static_cast<int64_t>(v);
      }
      break;
    default: std::memcpy(out, p, static_cast<size_t>(n) * 8); break;
  }
}

std::pair<int64_t, int64_t> TokenShard::max_token() const {
  // In blocks through read(): one code path for every width, and a buffer that stays in cache.
  constexpr int64_t kBlock = 1 << 14;
  int64_t buffer[kBlock];
  int64_t best = -1, where = 0;
  for (int64_t first = 0; first < count; first += kBlock) {
    const int64_t n = std::min(kBlock, count - first);
    read(first, n, buffer);
    for (int64_t i = 0; i < n; ++i)
      if (buffer[i] > best || buffer[i] < 0) {
        if (buffer[i] < 0) return {buffer[i], first + i};  // a negative id is as wrong as a large one
        best = buffer[i];
        where = first + i;
      }
  }
  return {best, where};
}

TokenShard open_token_shard(const std::string& path) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) return from_npy(path);
  TokenShard s;
  s.path = path;
  s.file = map_file(path);
  const uint64_t size = s.file.size;
  const uint8_t* p = s.file.data;
  const int32_t magic = size >= kHeaderBytes ? header_word(p, 0) : 0;
  if (magic == kMagicU16 || magic == kMagicU32) {
    const int32_t version = header_word(p, 1), count = header_word(p, 2);
    const int expected_version = magic == kMagicU16 ? 1 : 7;
    if (version != expected_version)
      throw shard_error(path, fmt::format("llm.c magic {} with version {} (expected {})", magic, version, expected_version),
                        "the file is damaged or from a newer llm.c");
    s.width = magic == kMagicU16 ? 2 : 4;
    s.count = count;
    const uint64_t expected = kHeaderBytes + static_cast<uint64_t>(count) * static_cast<uint64_t>(s.width);
    if (count < 0 || size != expected)
      throw shard_error(path,
                        fmt::format("its header says {} tokens ({} bytes with the header), the file has {} bytes", count,
                                    expected, size),
                        "a shard cut short (a copy or download that stopped): write it again");
    s.tokens = p + kHeaderBytes;
    s.format = magic == kMagicU16 ? "llm.c uint16" : "llm.c uint32";
    return s;
  }
  // A start that reads as a header (its count matches the file's size) with a magic that is not
  // llm.c's: a damaged shard, not tokens.
  if (size >= kHeaderBytes) {
    const int64_t count = header_word(p, 2);
    if (count > 0 && (size == kHeaderBytes + 2 * static_cast<uint64_t>(count) ||
                      size == kHeaderBytes + 4 * static_cast<uint64_t>(count)))
      throw shard_error(path, fmt::format("a token shard header with magic {} (expected {} or {})", magic, kMagicU16,
                                          kMagicU32),
                        "llm.c shards start with 20240520 (uint16 tokens) or 20240801 (uint32)");
  }
  // nanoGPT's prepare.py: the tokens alone, uint16.
  if (size % 2 != 0)
    throw shard_error(path, fmt::format("{} bytes: neither an llm.c shard nor uint16 tokens (an odd size)", size),
                      "token files are llm.c shards, headerless uint16 .bin files, or 1-D integer .npy files");
  s.width = 2;
  s.count = static_cast<int64_t>(size / 2);
  s.tokens = p;
  s.format = "uint16 (no header)";
  return s;
}

}  // namespace gputrain
