// NumPy .npz archives: zip files of .npy members, stored (np.savez) or deflated (np.savez_compressed).
#include <algorithm>
#include <cstring>

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

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
  if (z.method == 0) {  // not CRC-checked: that would read a 10 GB mapping at open time
    if (z.csize != z.usize) fail(where, "corrupt zip: a stored member's sizes disagree");
    return NpyArray::parse(where, m.owner, m.data + start, z.csize);  // zero copy, from the mapping
  }
  if (z.method != 8)
    fail(where, fmt::format("unsupported zip compression method {} (only stored and deflate)", z.method));
  // A compressed member is inflated into memory whole (a stored one is read from the mapping):
  // more than half the machine's memory would end in an out-of-memory kill, and a 10 MB file of
  // zeros inflates to 10 GB. Half: the arrays are converted to tensors beside it.
  // The memory this process may use: the machine's, or less under a ulimit -v (a container's
  // cgroup limit is not read: there the kernel's out-of-memory kill still decides).
  double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (rlimit limit{}; getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    ram = std::min(ram, static_cast<double>(limit.rlim_cur));
  if (static_cast<double>(z.usize) > 0.5 * ram)
    fail(where, fmt::format("its compressed member '{}' inflates to {} MiB, more than half of the {} MiB this process "
                            "may use",
                            z.name, z.usize >> 20, static_cast<int64_t>(ram) >> 20),
         "save the arrays uncompressed (numpy.savez, not savez_compressed): gputrain reads those from the file "
         "without copying them into memory");
  auto buf = zip_inflate(where, m, z, start, kZipHint);
  const uint8_t* bytes = buf->data();
  const uint64_t size = buf->size();
  return NpyArray::parse(where, std::move(buf), bytes, size);
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
