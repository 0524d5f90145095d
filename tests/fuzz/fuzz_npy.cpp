// libFuzzer target: the .npy and .npz parsers on arbitrary bytes. Errors for people are
// expected; crashes, hangs, leaks and huge allocations are bugs.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/npy.h"

namespace {

// Reads every element, so a size the parser accepted but the data does not hold shows up
// under AddressSanitizer.
void touch(const gputrain::NpyArray& a) {
  std::vector<float> out(64);
  for (int64_t i = 0; i < a.numel; i += 64) {
    int64_t n = a.numel - i < 64 ? a.numel - i : 64;
    a.to_float(i, n, out.data());
  }
  if (a.numel > 0) (void)a.at(a.numel - 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("npy", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    touch(gputrain::read_npy(path));
  } catch (const gputrain::Error&) {}
  try {
    for (const auto& [key, array] : gputrain::read_npz(path)) touch(array);
  } catch (const gputrain::Error&) {}
  return 0;
}
