#include "core/install_dirs.h"

#include <filesystem>

// Defined in the build tree's generated/git_revision.cpp.
const char* gputrain_git_revision();

namespace gputrain {

namespace fs = std::filesystem;

std::string exe_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string installed_share_dir() {
  const std::string dir = exe_dir();
  return dir.empty() ? std::string() : (fs::path(dir) / "../share/gputrain").lexically_normal().string();
}

std::string git_revision() { return gputrain_git_revision(); }

}  // namespace gputrain
