// libFuzzer target: arbitrary bytes as a --model net.pt2 archive, through gputrain's PT2 reader
// (zip, the program's JSON, tensor metas against their members) and the graph compiler (node
// targets, argument kinds, the signature), in training and eval form. A file is read or refused
// with a usage error (exit code 2); any other exception, a crash, a hang or a large allocation
// is a bug. The graph is compiled, not run: running it is ATen's kernels on checked arguments.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include <torch/torch.h>

#include "core/error.h"
#include "models/exported_graph.h"
#include "weights/pt2_archive.h"

using namespace gputrain;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("pt2", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const Pt2Archive a = read_pt2(path);
    for (const auto& [name, t] : a.weights)  // touched end to end: a view past its bytes shows up
      if (t.numel() > 0) (void)t.flatten().sum();
    ExportedGraph train(a.program, path, false);
    ExportedGraph eval(a.program, path, true);
  } catch (const Error& e) {
    if (e.exit_code != 2) std::abort();
  }
  return 0;
}
