// Durable file replacement (temporary file, fsync, rename, fsync of the folder), shared by
// checkpoints, exports, config.json, reports and every output file.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

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

namespace {
// Where the data for /dev/stdout goes once keep_stdout_for_data() moved the report off fd 1.
int stdout_data = -1;
}  // namespace

int own_descriptor(const std::string& path) {
  // /dev/fd/N reads its folder's link (/dev/fd -> /proc/self/fd) before N's: by hand, then.
  const std::string p = path.rfind("/dev/fd/", 0) == 0 ? "/proc/self/fd/" + path.substr(8) : write_target(path);
  for (const std::string& prefix : {std::string("/proc/self/fd/"), std::string("/proc/thread-self/fd/"),
                                   "/proc/" + std::to_string(::getpid()) + "/fd/"}) {
    if (p.rfind(prefix, 0) != 0) continue;
    const std::string n = p.substr(prefix.size());
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(n);
  }
  return -1;
}

void keep_stdout_for_data() {
  if (stdout_data >= 0) return;
  std::fflush(stdout);
  stdout_data = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (stdout_data >= 0) ::dup2(2, 1);
}

int descriptor_to_write(int fd) { return fd == 1 && stdout_data >= 0 ? stdout_data : fd; }

bool is_special_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // The path as given first: the kernel follows its links, /proc's "magic" ones too
  // (/dev/stdout -> /proc/self/fd/1 -> "pipe:[123]", no path to follow by hand). A link through
  // /proc names an open file: it is written through, as a device is.
  const std::string target = write_target(path_);
  if (const int own = own_descriptor(path_); own >= 0) {
    // One of this process's open files (/dev/stdout): written on its descriptor, where the
    // shell left it (a `>>` file keeps its text, a `>` file its offset), never reopened.
    std::fflush(nullptr);  // what the process printed there before comes first
    fd_ = ::fcntl(descriptor_to_write(own), F_DUPFD_CLOEXEC, 3);
  } else if (is_special_file(path_) || target.rfind("/proc/", 0) == 0) {
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

void copy_file_atomically(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) throw runtime_error("reading " + from + ": " + std::strerror(errno));
  AtomicFile out(to);
  std::vector<char> buf(1 << 20);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
    out.write(buf.data(), static_cast<size_t>(in.gcount()));
  if (in.bad()) throw runtime_error("reading " + from + " failed");
  out.commit();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace gputrain
