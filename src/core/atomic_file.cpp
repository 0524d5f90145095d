// Durable file replacement (fsync, rename, fsync of the folder), shared by checkpoints and exports.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

namespace gputrain {
namespace {

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void fsync_file(const std::string& path) { fsync_path(path, O_RDONLY); }

void rename_durably(const std::string& tmp, const std::string& path) {
  std::filesystem::rename(tmp, path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  fsync_path(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
}

}  // namespace gputrain
