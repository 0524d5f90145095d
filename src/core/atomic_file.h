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

// Copies the file `from` to `to` as AtomicFile writes: `to` is whole or as it was.
void copy_file_atomically(const std::string& from, const std::string& to);

// Where a write to `path` lands: `path` with its symlinks followed (a dangling link gives the
// path it points to; a link into /proc stops there). A loop of links throws.
std::string write_target(const std::string& path);

// Whether `path` (followed) exists and is not a regular file or a folder: a device, pipe or socket.
bool is_special_file(const std::string& path);

// The descriptor of this process that `path` names (/dev/stdout, /dev/fd/2, /proc/self/fd/1, a
// link to one), or -1. AtomicFile writes such a path on that descriptor, never reopening it.
int own_descriptor(const std::string& path);
// For a command whose data goes to /dev/stdout: from now on what the process prints to stdout
// goes to stderr, and a write to /dev/stdout lands in the original stdout, so that the stream
// carries the data alone. Call before the report's first line.
void keep_stdout_for_data();
// The descriptor a write to this process's descriptor `fd` uses (stdout's data, once kept).
int descriptor_to_write(int fd);

// Writes `text` to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace gputrain
