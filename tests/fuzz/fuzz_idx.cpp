// libFuzzer target: the IDX parser on arbitrary bytes (raw or gzip). Errors for people are
// expected; crashes, hangs, leaks and huge allocations are bugs.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("idx", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  try {
    gputrain::read_idx("/proc/self/fd/" + std::to_string(fd));
  } catch (const gputrain::Error&) {}
  return 0;
}
