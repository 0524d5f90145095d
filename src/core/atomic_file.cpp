// Durable file replacement (temporary file, fsync, rename, fsync of the folder), shared by
// checkpoints, exports, config.json, reports and every output file.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace gputrain {

std::string write_target(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  // 40: the kernel's own limit on links followed in one lookup (ELOOP past it).
  for (int i = 0; i < 40; ++i) {
    // A link in /proc names an open file (/dev/stdout -> /proc/self/fd/1): it stops here.
    if (p.string().rfind("/proc/", 0) == 0) return p.string();
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    std::error_code ec;
    fs::path to = fs::read_symlink(p, ec);
    if (ec) return p.string();
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  throw runtime_error("writing " + path + ": " + std::strerror(ELOOP));  // a loop: no file to replace
}

bool is_special_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // The path as given first: the kernel follows its links, /proc's "magic" ones too
  // (/dev/stdout -> /proc/self/fd/1 -> "pipe:[123]", no path to follow by hand). A link through
  // /proc names an open file: it is written through, as a device is.
  const std::string target = write_target(path_);
  if (is_special_file(path_) || target.rfind("/proc/", 0) == 0) {
    // A pipe blocks here until a reader opens it, as a shell's `>` does.
    fd_ = ::open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  } else {
    tmp_ = target + ".tmp";
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (fd_ < 0) throw runtime_error("writing " + path_ + ": " + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

size_t AtomicFile::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  for (size_t done = 0; done < size && error_ == 0;) {
    ssize_t n = ::write(fd_, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) error_ = n < 0 ? errno : ENOSPC;
    else done += static_cast<size_t>(n);
  }
  return size;
}

void AtomicFile::fail(int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  committed_ = true;  // nothing left for the destructor
  throw runtime_error("writing " + path_ + ": " + std::strerror(err));
}

void AtomicFile::commit() {
  if (error_ != 0) fail(error_);
  // fsync before close: ENOSPC and EIO of delayed writes (NFS, a full thin volume) show here.
  // Pipes, sockets and most devices cannot be synced (EINVAL): what they took is all they say.
  if (::fsync(fd_) != 0 && (!tmp_.empty() || (errno != EINVAL && errno != EROFS && errno != ENOTSUP))) fail(errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(errno);
  if (tmp_.empty()) {  // written straight through
    committed_ = true;
    return;
  }
  const std::string target = tmp_.substr(0, tmp_.size() - 4);
  std::error_code ec;
  std::filesystem::rename(tmp_, target, ec);
  if (ec) fail(ec.value());
  committed_ = true;
  std::string dir = std::filesystem::path(target).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomically(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace gputrain
