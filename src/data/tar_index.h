// The members of a tar archive, found by reading its headers only: WebDataset shards.
#pragma once
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
};

// Indexes the regular files of a tar as Python's tarfile and GNU tar write it (ustar, GNU long
// names, pax path and size records). Directories, links and other entries are passed over.
// Throws usage_error only when the file cannot be opened or read.
TarIndex index_tar(const std::string& path);

}  // namespace gputrain
