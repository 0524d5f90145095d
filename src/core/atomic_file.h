// Durable file replacement: a crash or an error leaves either the old file or the new one,
// never a torn one.
#pragma once
#include <cstddef>
#include <string>

namespace gputrain {

// A file written as `<path>.tmp` and renamed over `path` only by commit() (after fsync; the
// folder is fsynced after the rename, so the rename itself survives a power cut). Without a
// commit the destructor removes the temporary file and `path` is as it was.
//
// Atomic replacement is for regular files alone. A symlink is followed and the file it points to
// is replaced in its own folder, so the link stays (a user's link into shared storage). A path
// that is a device, a pipe or a socket is written straight through, never renamed over:
// renaming over /dev/full as root once turned the device node into a regular file.
//
// write() never throws: it remembers the first error and drops later data, because LibTorch's
// archive writer calls its sink where an exception would end the process (a destructor).
// commit() reports that error, or its own, as a runtime error "writing <path>: <reason>".
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // throws when the temporary file cannot be made
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  size_t write(const void* data, size_t size);  // returns `size`, even after an error
  void commit();

 private:
  [[noreturn]] void fail(int err);

  std::string path_, tmp_;  // tmp_ is empty when writing straight through
  int fd_ = -1;
  int error_ = 0;
  bool committed_ = false;
};

// Where a write to `path` lands: `path` with its symlinks followed (a dangling link gives the
// path it points to; a link into /proc stops there). A loop of links throws.
std::string write_target(const std::string& path);

// Whether `path` (followed) exists and is not a regular file or a folder: a device, pipe or socket.
bool is_special_file(const std::string& path);

// Writes `text` to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace gputrain
