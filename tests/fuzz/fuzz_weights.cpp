// libFuzzer target: arbitrary bytes as a weights file for --init_from, through gputrain's own
// weights-only unpickler and torch.save reader: the bytes as a whole file (zip, storages, the
// pickle inside) and as a bare pickle. A file is read or refused with a usage error (exit code
// 2); any other exception, a crash, a hang or a large allocation is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include <torch/torch.h>

#include "core/error.h"
#include "weights/torch_save.h"
#include "weights/unpickler.h"

using namespace gputrain;

namespace {

template <typename F>
void expect_read_or_refused(F body) {
  try {
    body();
  } catch (const Error& e) {
    if (e.exit_code != 2) std::abort();
  }
}

// Every tensor read back is touched end to end, so a view past its storage shows up.
void touch(const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  for (const auto& [name, t] : tensors)
    if (t.numel() > 0) (void)t.flatten().sum();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("weights", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  expect_read_or_refused([&] {
    const MappedFile m = map_file(path);
    if (detect_weights_format(path, m) == WeightsFormat::TorchSave) {
      touch(read_torch_save(path, false).tensors);
      touch(read_torch_save(path, true).tensors);
    }
  });
  // The pickle alone, its storages zeros of the claimed size (up to 64 Ki elements: the zip
  // reader checks real claims against the member sizes).
  expect_read_or_refused([&] {
    const StorageReader zeros = [](const std::string& key, torch::ScalarType dtype, int64_t numel) {
      if (numel > (1 << 16)) throw usage_error("storage '" + key + "' too large for the fuzzer");
      return torch::zeros({numel}, torch::TensorOptions().dtype(dtype));
    };
    const Unpickled u = unpickle_weights("fuzz", data, size, zeros, "");
    for (const auto& v : u.values)
      if (v.kind == PickleValue::Kind::Tensor && v.tensor.numel() > 0) (void)v.tensor.flatten().sum();
  });
  return 0;
}
