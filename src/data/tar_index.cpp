// Tar headers are 512-byte blocks; each member's data follows its header, padded to 512.
#include "data/tar_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {
namespace {

constexpr uint64_t kBlock = 512;

// An octal field (NUL or space terminated), or GNU's base-256 for large sizes; -1 if malformed.
int64_t number(const char* f, size_t n) {
  if (static_cast<unsigned char>(f[0]) & 0x80) {
    int64_t v = 0;
    for (size_t i = 1; i < n; ++i) {
      if (v > (INT64_MAX >> 8)) return -1;
      v = (v << 8) | static_cast<unsigned char>(f[i]);
    }
    return v;
  }
  int64_t v = 0;
  size_t i = 0;
  while (i < n && f[i] == ' ') ++i;
  bool any = false;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; ++i, any = true) {
    if (v > (INT64_MAX >> 3)) return -1;
    v = v * 8 + (f[i] - '0');
  }
  if (i < n && f[i] != '\0' && f[i] != ' ') return -1;
  return any ? v : 0;
}

bool checksum_ok(const char* h) {
  const int64_t stored = number(h + 148, 8);
  int64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  return stored == sum;
}

std::string field(const char* f, size_t n) { return std::string(f, strnlen(f, n)); }

// A file that is no tar at all, from its first bytes: a compressed shard (WebDataset's readers
// stream .tar.gz; shards here are read by offset, which compression rules out), or anything else
// whose first block is no tar header. "" when it may be a tar.
std::string not_a_tar(const char* h, size_t got) {
  const auto starts = [&](const char* magic, size_t n) { return got >= n && std::memcmp(h, magic, n) == 0; };
  const char* compressed = starts("\x1f\x8b", 2)                    ? "gzip"
                           : starts("BZh", 3)                         ? "bzip2"
                           : starts("\xfd" "7zXZ\x00", 6)            ? "xz"
                           : starts("\x28\xb5\x2f\xfd", 4)          ? "zstd"
                           : starts("PK\x03\x04", 4)                 ? "zip"
                                                                      : nullptr;
  if (compressed)
    return fmt::format("it is compressed ({}): shards are read by offset, so they must be plain tar files "
                       "(decompress it, e.g. gunzip -c shard.tar.gz > shard.tar)",
                       compressed);
  if (got == 0) return "it is empty (0 bytes): not a tar file";
  // A first header cut short or corrupt still shows its "ustar" magic: a truncation or a corrupt
  // header, said later; zero blocks are an empty archive.
  const bool ustar = got >= 262 && std::memcmp(h + 257, "ustar", 5) == 0;
  const bool zeros = got == kBlock && std::all_of(h, h + kBlock, [](char c) { return c == 0; });
  if (!ustar && !zeros && (got < kBlock || !checksum_ok(h))) {
    std::string start;
    for (size_t i = 0; i < std::min<size_t>(got, 16); ++i)
      start += std::isprint(static_cast<unsigned char>(h[i])) ? h[i] : '.';
    return fmt::format("it is not a tar file (it starts '{}', no tar header)", start);
  }
  return "";
}

// pax records: "<length> <key>=<value>\n"; sets path and size when present (size -2 when negative).
void parse_pax(const std::string& data, std::string* path, int64_t* size) {
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t space = data.find(' ', pos);
    if (space == std::string::npos) return;
    const long len = std::strtol(data.c_str() + pos, nullptr, 10);
    if (len <= 0 || pos + static_cast<size_t>(len) > data.size() || space + 2 > pos + static_cast<size_t>(len)) return;
    const std::string rec = data.substr(space + 1, pos + static_cast<size_t>(len) - space - 2);  // without "\n"
    const size_t eq = rec.find('=');
    if (eq != std::string::npos) {
      if (rec.compare(0, eq, "path") == 0) *path = rec.substr(eq + 1);
      if (rec.compare(0, eq, "size") == 0) {
        const long long v = std::strtoll(rec.c_str() + eq + 1, nullptr, 10);
        *size = v < 0 ? -2 : v;  // -2: a negative size, which the caller reports
      }
    }
    pos += static_cast<size_t>(len);
  }
}

}  // namespace

ShardFile::ShardFile(const std::string& path) : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}

ShardFile::~ShardFile() {
  if (fd >= 0) ::close(fd);
}

size_t ShardFile::read_at(uint64_t offset, void* buf, size_t n) const {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(buf) + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

TarIndex index_tar(const std::string& path) {
  const ShardFile f(path);
  if (f.fd < 0) throw usage_error(fmt::format("shard '{}': cannot open it ({})", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw usage_error(fmt::format("shard '{}': cannot read it", path));
  const auto file_size = static_cast<uint64_t>(st.st_size);
  TarIndex out;
  std::string long_name;   // from a GNU 'L' entry or a pax record, for the next member
  int64_t pax_size = -1;
  const auto last = [&] {
    return out.members.empty() ? std::string("the start of the file") : "member '" + out.members.back().name + "'";
  };
  char h[kBlock];
  for (uint64_t pos = 0;;) {
    const size_t got = f.read_at(pos, h, kBlock);
    if (pos == 0)
      if (const std::string why = not_a_tar(h, got); !why.empty())
        throw usage_error(fmt::format("shard '{}': {}", path, why), "WebDataset shards are tar files of "
                                                                     "<key>.<image> and <key>.cls members "
                                                                     "(tools/make_shards.py writes them)");
    if (got == 0 && pos == file_size) {
      // Every tar writer (Python's tarfile, GNU tar) ends with zero blocks: a file that stops
      // between two members without them was cut there, and what followed is lost.
      out.cut_member = !long_name.empty() || pax_size >= 0;
      out.damage = out.cut_member
                       ? fmt::format("truncated tar: the file ends at offset {}, after the extended header {}", pos,
                                     long_name.empty() ? "of a member" : "of '" + long_name + "'")
                       : fmt::format("truncated tar: the file ends at offset {}, after {}, without tar's end-of-archive "
                                     "blocks", pos, last());
      break;
    }
    if (got < kBlock) {
      out.damage = fmt::format("truncated tar: the header after {} is cut at offset {}", last(), pos);
      out.cut_member = true;
      break;
    }
    if (std::all_of(h, h + kBlock, [](char c) { return c == 0; })) break;  // end of archive
    if (!checksum_ok(h)) {
      out.damage = fmt::format("corrupt tar header at offset {} (after {}): its checksum does not match", pos, last());
      break;
    }
    int64_t size = number(h + 124, 12);
    const char type = h[156];
    std::string name = field(h, 100);
    if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345] != '\0') name = field(h + 345, 155) + "/" + name;
    if (!long_name.empty()) name = long_name;
    if (pax_size >= 0) size = pax_size;
    if (size < 0) {
      out.damage = fmt::format("corrupt tar header at offset {}: member '{}' has an unreadable size", pos, name);
      break;
    }
    const uint64_t data = pos + kBlock, usize = static_cast<uint64_t>(size);
    if (data + usize > file_size) {
      out.damage = fmt::format("truncated tar: member '{}' needs {} bytes at offset {}, the file ends at {}", name,
                               usize, data, file_size);
      out.cut_member = true;
      break;
    }
    if (type == 'L' || type == 'K' || type == 'x') {
      // A name or a few records: a megabyte is far beyond any real one, and a hostile size
      // must not become an allocation.
      if (usize > (1u << 20)) {
        out.damage = fmt::format("corrupt tar header at offset {}: a {}-byte extended header", pos, usize);
        break;
      }
      std::string text(usize, '\0');
      if (f.read_at(data, text.data(), usize) != usize) throw usage_error("shard '" + path + "': cannot read it");
      if (type == 'L') {
        long_name = text.substr(0, strnlen(text.c_str(), text.size()));
      } else if (type == 'x') {
        parse_pax(text, &long_name, &pax_size);
        if (pax_size == -2) {
          out.damage = fmt::format("corrupt tar header at offset {}: a negative size in its pax record", pos);
          break;
        }
      }  // 'K' (a long link target) names nothing we read
    } else {
      if (type == '0' || type == '\0' || type == '7') out.members.push_back({name, data, usize});
      if (type != 'g') {  // a global pax header sets nothing for the next member alone
        long_name.clear();
        pax_size = -1;
      }
    }
    pos = data + (usize + kBlock - 1) / kBlock * kBlock;
  }
  return out;
}

}  // namespace gputrain
