// libFuzzer target: WebDataset shards on arbitrary bytes: the tar index (ustar, GNU, pax), the
// grouping of members into samples and the label reads, then one sample's decode. Errors for
// people are expected; crashes, hangs, leaks and huge allocations are bugs.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/tar_index.h"
#include "data/webdataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The readers take a path: one file per process, rewritten for each input.
  static const std::string path = "/tmp/gputrain_fuzz_tar_" + std::to_string(getpid()) + ".tar";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    const gputrain::TarIndex index = gputrain::index_tar(path);
    for (const auto& m : index.members)
      if (m.offset + m.size > size) __builtin_trap();  // a member past the end of the file
  } catch (const gputrain::Error&) {
  }
  for (bool skip_bad : {false, true}) {
    try {
      gputrain::WebDatasetOptions o;
      o.height = o.width = 4;
      o.max_pixels = int64_t{1} << 20;
      o.skip_bad = skip_bad;
      const gputrain::WebDataset shards({path}, o);
      float x[3 * 4 * 4];
      shards.get(0, x, nullptr, 1);
      (void)shards.stream_order(1, 0, true);
    } catch (const gputrain::Error&) {
    }
  }
  return 0;
}
