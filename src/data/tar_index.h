// The members of a tar archive, found by reading its headers only: WebDataset shards.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gputrain {

struct TarMember {
  std::string name;
  uint64_t offset = 0, size = 0;  // where the member's bytes lie in the archive
};

struct TarIndex {
  std::vector<TarMember> members;  // regular files, in archive order
  // Empty, or why the archive stops early (truncated or corrupt, naming the member and offset):
  // the members before it are complete.
  std::string damage;
  // The damage cuts a member (its header or its bytes), so a sample is lost there; not so for a
  // file that ends between two members without tar's end blocks (what followed is unknown).
  bool cut_member = false;
};

// A shard opened for reading by offset (closed with it); fd < 0 when it cannot be opened.
struct ShardFile {
  int fd;
  explicit ShardFile(const std::string& path);
  ~ShardFile();
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;
  // Reads up to n bytes at offset (pread, retried); returns how many (fewer at the end of the file).
  size_t read_at(uint64_t offset, void* buf, size_t n) const;
};

// Indexes the regular files of a tar as Python's tarfile and GNU tar write it (ustar, GNU long
// names, pax path and size records). Directories, links and other entries are passed over.
// Throws usage_error when the file cannot be opened or read, or is no tar at all (compressed, text).
TarIndex index_tar(const std::string& path);

}  // namespace gputrain
