// Read-only memory mappings of whole files (.npy/.npz data, checkpoints before they are loaded).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace gputrain {

// A read-only memory mapping of a whole file; copies share it and the last one unmaps it.
struct MappedFile {
  const uint8_t* data = nullptr;
  uint64_t size = 0;  // an empty file has size 0 and no mapping
  std::shared_ptr<const void> owner;
};

// Maps `path` read-only. Throws a usage error naming it when it cannot be opened or mapped, or is
// not a regular file.
MappedFile map_file(const std::string& path);

}  // namespace gputrain
