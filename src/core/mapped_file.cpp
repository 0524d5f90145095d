// Read-only memory mappings of whole files.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace gputrain {

// Note: if another process truncates the file while it is mapped, reads fault (SIGBUS); data
// files are not expected to change during training.
MappedFile map_file(const std::string& path) {
  // O_NONBLOCK: opening a pipe with no writer returns at once (to be refused below as not a
  // regular file) instead of waiting forever; it changes nothing for a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw usage_error(path + ": cannot open (" + std::strerror(errno) + ")", "check the path and its permissions");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw usage_error(path + ": not a regular file", "pass the path of a file, not a folder or device");
  }
  MappedFile m;
  m.size = static_cast<uint64_t>(st.st_size);
  if (m.size == 0) {  // mmap refuses length 0; callers report the file as too short
    ::close(fd);
    return m;
  }
  void* p = mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  if (p == MAP_FAILED)
    throw usage_error(path + ": cannot memory-map (" + std::strerror(err) + ")", "check that the file is readable");
  uint64_t size = m.size;
  m.owner = std::shared_ptr<const void>(p, [size](const void* q) { munmap(const_cast<void*>(q), size); });
  m.data = static_cast<const uint8_t*>(p);
  return m;
}

}  // namespace gputrain
