// core/host_memory.h: large blocks freed by one step are reused by the next, with no new pages.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include "core/host_memory.h"

using namespace gputrain;

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Where a block lives while touched: a volatile pointer, so that the compiler keeps the malloc,
// memset and free (it may drop the three as having no effect otherwise).
void* volatile block;

// Allocates, touches and frees a block of `bytes`; returns the page faults that took.
long faults_of_block(size_t bytes) {
  const long before = minor_faults();
  block = std::malloc(bytes);
  std::memset(block, 1, bytes);
  std::free(block);
  return minor_faults() - before;
}

}  // namespace

TEST_CASE("host memory: a freed 16 MiB block is reused without new page faults", "[core]") {
#if defined(__GLIBC__)
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("GLIBC_TUNABLES")) {
    WARN("the environment sets glibc's malloc thresholds: keep_freed_blocks leaves them");
    return;
  }
  constexpr size_t kBlock = 16u << 20;  // 4,096 pages
  keep_freed_blocks();
  faults_of_block(kBlock);  // the first one maps its pages
  // glibc's defaults unmap it on free (or trim it from the heap's top): every page again.
  CHECK(faults_of_block(kBlock) < 64);
  CHECK(faults_of_block(kBlock) < 64);
#else
  WARN("not glibc: nothing is set");
#endif
}
