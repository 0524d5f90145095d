// NumPy .npz archives: zip files of .npy members, stored (np.savez) or deflated (np.savez_compressed).
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/zip.h"
#include "data/npy.h"

namespace gputrain {
namespace {

const char* const kZipHint = "write archives with numpy.savez or numpy.savez_compressed";

[[noreturn]] void fail(const std::string& where, const std::string& why, const std::string& hint = kZipHint) {
  throw usage_error(where + ": " + why, hint);
}

// Central directory of an .npz, after catching the common mix-up with a plain .npy.
std::vector<ZipMember> npz_directory(const std::string& path, const MappedFile& m) {
  if (m.size >= 6 && std::memcmp(m.data, "\x93NUMPY", 6) == 0)
    fail(path, "bad magic: this is an .npy file, not an .npz archive", "name it .npy");
  return zip_directory(path, m, kZipHint);
}

// np.load's keys: "x_train.npy" is "x_train"; members not ending in .npy are not arrays.
bool npy_key(const std::string& name, std::string& key) {
  if (name.size() <= 4 || name.compare(name.size() - 4, 4, ".npy") != 0) return false;
  key = name.substr(0, name.size() - 4);
  return true;
}

NpyArray read_member(const std::string& where, const MappedFile& m, const ZipMember& z) {
  const uint64_t start = zip_member_start(where, m, z, kZipHint);
  if (z.method == 0) {
    if (z.csize != z.usize) fail(where, "corrupt zip: a stored member's sizes disagree");
    return NpyArray::parse(where, m.owner, m.data + start, z.csize);  // zero copy, from the mapping
  }
  if (z.method != 8)
    fail(where, "unsupported zip compression method " + std::to_string(z.method) + " (only stored and deflate)");
  // Deflate expands at most ~1032:1, so a larger declared size is a lie; this bounds what the
  // declared size can make us allocate. The buffer also grows only as data really inflates.
  if (z.usize / 1032 > z.csize + 1)
    fail(where, "corrupt zip: " + std::to_string(z.csize) + " compressed bytes cannot inflate to the declared " +
                    std::to_string(z.usize));
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
      if (out > z.usize) fail(where, "corrupt zip: inflates to more than the declared " + std::to_string(z.usize) + " bytes");
      buf->resize(std::min(z.usize + 1, std::max<uint64_t>(2 * out, uint64_t{1} << 20)));
    }
    zs.next_out = buf->data() + out;
    zs.avail_out = static_cast<uInt>(std::min(buf->size() - out, kStep));
    uInt before = zs.avail_out;
    int ret = inflate(&zs, Z_NO_FLUSH);
    out += before - zs.avail_out;
    if (ret == Z_STREAM_END) break;
    if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT)
      fail(where, std::string("corrupt deflate stream (zlib: ") + (zs.msg ? zs.msg : "bad data") + ")");
    if (ret == Z_MEM_ERROR) throw runtime_error(where + ": out of memory while inflating");
    if (ret == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0)
      fail(where, "truncated: the deflate stream ends early");
  }
  if (out != z.usize)
    fail(where, "corrupt zip: inflates to " + std::to_string(out) + " bytes, the directory declares " +
                    std::to_string(z.usize));
  // Stored members are not CRC-checked: that would read a 10 GB mapping at open time.
  if (crc32_of(buf->data(), out) != z.crc) fail(where, "corrupt zip: CRC mismatch");
  buf->resize(out);
  const uint8_t* bytes = buf->data();
  return NpyArray::parse(where, std::move(buf), bytes, out);
}

}  // namespace

std::vector<std::string> npz_keys(const std::string& path) {
  MappedFile m = map_file(path);
  std::vector<std::string> keys;
  std::string key;
  for (const auto& z : npz_directory(path, m))
    if (npy_key(z.name, key)) keys.push_back(key);
  return keys;
}

std::map<std::string, NpyArray> read_npz(const std::string& path, const std::vector<std::string>& only) {
  MappedFile m = map_file(path);
  std::map<std::string, NpyArray> arrays;
  std::string key;
  for (const auto& z : npz_directory(path, m)) {
    if (!npy_key(z.name, key)) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), key) == only.end()) continue;
    if (arrays.count(key)) fail(path, "corrupt zip: member '" + z.name + "' appears twice");
    arrays.emplace(key, read_member(path + ":" + key, m, z));
  }
  return arrays;
}

}  // namespace gputrain
