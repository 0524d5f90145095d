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

  std::string path_, tmp_;
  int fd_ = -1;
  int error_ = 0;
  bool committed_ = false;
};

// Writes `text` to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace gputrain
