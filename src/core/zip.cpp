// Zip archives: the central directory and member data, every offset checked before it is followed.
#include "core/zip.h"

#include <zlib.h>

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {
namespace {

[[noreturn]] void fail(const std::string& where, const std::string& why, const std::string& hint) {
  throw usage_error(where + ": " + why, hint);
}

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t rd32(const uint8_t* p) { return rd16(p) | (uint32_t{rd16(p + 2)} << 16); }
uint64_t rd64(const uint8_t* p) { return rd32(p) | (uint64_t{rd32(p + 4)} << 32); }

}  // namespace

std::vector<ZipMember> zip_directory(const std::string& path, const MappedFile& m, const std::string& hint) {
  const uint8_t* d = m.data;
  uint64_t size = m.size;
  if (size < 22) fail(path, "truncated: " + std::to_string(size) + " bytes is too short for a zip archive", hint);
  // The end-of-central-directory record ends the file, followed only by its comment (< 64 KiB).
  uint64_t eocd = 0;
  bool found = false;
  for (uint64_t i = size - 22 + 1, lo = size > 22 + 65535 ? size - 22 - 65535 : 0; i-- > lo;)
    if (rd32(d + i) == 0x06054b50 && i + 22 + rd16(d + i + 20) <= size) {
      eocd = i;
      found = true;
      break;
    }
  if (!found) fail(path, "bad magic: not a zip archive (no end-of-central-directory record)", hint);
  const uint8_t* e = d + eocd;
  if (rd16(e + 4) != 0 && rd16(e + 4) != 0xFFFF) fail(path, "multi-disk zip archives are not supported", hint);
  uint64_t entries = rd16(e + 10), cd_size = rd32(e + 12), cd_offset = rd32(e + 16), cd_end = eocd;
  // Zip64 (np.savez writes it for big arrays): a locator just before the record points at a
  // 64-bit record holding the real counts and offsets.
  if (eocd >= 20 && rd32(d + eocd - 20) == 0x07064b50) {
    uint64_t z = rd64(d + eocd - 20 + 8);
    if (z > eocd - 20 || eocd - 20 - z < 56 || rd32(d + z) != 0x06064b50)
      fail(path, "corrupt zip64 end-of-central-directory record", hint);
    entries = rd64(d + z + 32);
    cd_size = rd64(d + z + 40);
    cd_offset = rd64(d + z + 48);
    cd_end = z;
  }
  if (cd_offset > cd_end || cd_size > cd_end - cd_offset)
    fail(path,
         "corrupt zip: central directory at " + std::to_string(cd_offset) + " (+" + std::to_string(cd_size) +
             " bytes) lies past the end of the file (" + std::to_string(size) + " bytes)",
         hint);
  if (entries > cd_size / 46) fail(path, "corrupt zip: more entries than the central directory can hold", hint);

  std::vector<ZipMember> members;
  const uint8_t* p = d + cd_offset;
  const uint8_t* end = p + cd_size;
  for (uint64_t n = 0; n < entries; ++n) {
    if (end - p < 46 || rd32(p) != 0x02014b50) fail(path, "corrupt zip: bad central directory entry", hint);
    ZipMember z;
    z.flags = rd16(p + 8);
    z.method = rd16(p + 10);
    z.crc = rd32(p + 16);
    z.csize = rd32(p + 20);
    z.usize = rd32(p + 24);
    z.offset = rd32(p + 42);
    uint64_t name_len = rd16(p + 28), extra_len = rd16(p + 30), comment_len = rd16(p + 32);
    if (static_cast<uint64_t>(end - p) - 46 < name_len + extra_len + comment_len)
      fail(path, "corrupt zip: central directory entry runs past its end", hint);
    z.name.assign(reinterpret_cast<const char*>(p + 46), name_len);
    // Zip64 extra field: 64-bit values for exactly those fields that read 0xFFFFFFFF, in order.
    for (const uint8_t *x = p + 46 + name_len, *xend = x + extra_len; xend - x >= 4;) {
      uint16_t id = rd16(x), len = rd16(x + 2);
      if (len > xend - x - 4) fail(path, "corrupt zip: extra field of '" + z.name + "' runs past its end", hint);
      if (id == 0x0001) {
        const uint8_t *v = x + 4, *vend = v + len;
        for (uint64_t* field : {&z.usize, &z.csize, &z.offset}) {
          if (*field != 0xFFFFFFFFu) continue;
          if (vend - v < 8) fail(path, "corrupt zip: short zip64 field for '" + z.name + "'", hint);
          *field = rd64(v);
          v += 8;
        }
      }
      x += 4 + len;
    }
    members.push_back(std::move(z));
    p += 46 + name_len + extra_len + comment_len;
  }
  return members;
}

uint64_t zip_member_start(const std::string& where, const MappedFile& m, const ZipMember& z, const std::string& hint) {
  if (z.flags & 1) fail(where, "encrypted zip members are not supported", hint);
  if (z.offset > m.size || m.size - z.offset < 30)
    fail(where,
         "corrupt zip: local header offset " + std::to_string(z.offset) + " is past the end of the file (" +
             std::to_string(m.size) + " bytes)",
         hint);
  const uint8_t* h = m.data + z.offset;
  if (rd32(h) != 0x04034b50) fail(where, "corrupt zip: bad local header signature", hint);
  // Only the name and extra lengths are used from the local header (see ZipMember).
  uint64_t start = z.offset + 30 + rd16(h + 26) + rd16(h + 28);
  if (start > m.size || z.csize > m.size - start)
    fail(where,
         "truncated: zip says " + std::to_string(z.csize) + " bytes, file holds " +
             std::to_string(start > m.size ? 0 : m.size - start),
         hint);
  return start;
}

std::shared_ptr<std::vector<uint8_t>> zip_inflate(const std::string& where, const MappedFile& m, const ZipMember& z,
                                                  uint64_t start, const std::string& hint) {
  // Deflate expands at most ~1032:1, so a larger declared size is a lie; this bounds what the
  // declared size can make us allocate. The buffer also grows only as data really inflates.
  if (z.usize / 1032 > z.csize + 1)
    fail(where,
         "corrupt zip: " + std::to_string(z.csize) + " compressed bytes cannot inflate to the declared " +
             std::to_string(z.usize),
         hint);
  auto buf = std::make_shared<std::vector<uint8_t>>();
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) throw runtime_error(where + ": zlib inflateInit2 failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
  const uint8_t* in = m.data + start;
  uint64_t in_left = z.csize, out = 0;
  constexpr uint64_t kStep = uint64_t{1} << 30;  // zlib counts in 32-bit units
  while (true) {
    if (zs.avail_in == 0 && in_left > 0) {
      zs.next_in = const_cast<Bytef*>(in);
      zs.avail_in = static_cast<uInt>(std::min(in_left, kStep));
      in += zs.avail_in;
      in_left -= zs.avail_in;
    }
    if (out == buf->size()) {  // one byte beyond the declared size detects a stream that runs over
      if (out > z.usize)
        fail(where, "corrupt zip: inflates to more than the declared " + std::to_string(z.usize) + " bytes", hint);
      buf->resize(std::min(z.usize + 1, std::max<uint64_t>(2 * out, uint64_t{1} << 20)));
    }
    zs.next_out = buf->data() + out;
    zs.avail_out = static_cast<uInt>(std::min(buf->size() - out, kStep));
    uInt before = zs.avail_out;
    int ret = inflate(&zs, Z_NO_FLUSH);
    out += before - zs.avail_out;
    if (ret == Z_STREAM_END) break;
    if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT)
      fail(where, std::string("corrupt deflate stream (zlib: ") + (zs.msg ? zs.msg : "bad data") + ")", hint);
    if (ret == Z_MEM_ERROR) throw runtime_error(where + ": out of memory while inflating");
    if (ret == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0)
      fail(where, "truncated: the deflate stream ends early", hint);
  }
  if (out != z.usize)
    fail(
        where,
        "corrupt zip: inflates to " + std::to_string(out) + " bytes, the directory declares " + std::to_string(z.usize),
        hint);
  if (!crc_matches(buf->data(), out, z.crc)) fail(where, "corrupt zip: CRC mismatch", hint);
  buf->resize(out);
  return buf;
}

std::pair<const uint8_t*, uint64_t> zip_stored_bytes(const std::string& where, const MappedFile& m, const ZipMember& z,
                                                     const std::string& hint) {
  const uint64_t start = zip_member_start(where, m, z, hint);
  if (z.method != 0)
    throw usage_error(fmt::format("{}: zip compression method {} (PyTorch stores its members uncompressed)", where, z.method),
                      hint);
  if (z.csize != z.usize) throw usage_error(where + ": corrupt zip: a stored member's sizes disagree", hint);
  if (!crc_matches(m.data + start, z.usize, z.crc)) throw usage_error(where + ": damaged (CRC-32 mismatch)", hint);
  return {m.data + start, z.usize};
}

uint32_t crc32_of(const uint8_t* data, uint64_t size) {
  constexpr uint64_t kStep = uint64_t{1} << 30;  // zlib counts in 32-bit units
  uLong crc = crc32(0, nullptr, 0);
  for (uint64_t done = 0; done < size; done += std::min(size - done, kStep))
    crc = crc32(crc, data + done, static_cast<uInt>(std::min(size - done, kStep)));
  return static_cast<uint32_t>(crc);
}

bool crc_matches(const uint8_t* data, uint64_t size, uint32_t crc) {
  const bool match = crc32_of(data, size) == crc;
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  // Fuzz builds (tools/fuzz.sh) compute the CRC but let mutated data through to the next parser.
  static_cast<void>(match);
  return true;
#else
  return match;
#endif
}

}  // namespace gputrain
