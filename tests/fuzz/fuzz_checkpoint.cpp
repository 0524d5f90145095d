// libFuzzer target: arbitrary bytes as a checkpoint, through the code that `--resume`, `eval`,
// `infer` and `export` use. A file is either loaded whole, leaving a model and optimizer that
// train, or refused with a usage error (exit code 2); any other exception, a crash or a hang is
// a bug.
//
// The reader is gputrain's own (the weights-only unpickler and the zip reader; no LibTorch
// deserializer), so tools/fuzz.sh instruments all of it, AddressSanitizer included. The run
// mutates real checkpoints, format 3 and the old TorchScript-archive format 2 (written by
// LLVMFuzzerInitialize when GPUTRAIN_FUZZ_SEED names a path), built with
// FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, which skips the CRC comparisons so that mutated
// records get past them.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include <torch/torch.h>

#include "config/config.h"
#include "core/error.h"
#include "legacy_checkpoint.h"
#include "train/checkpoint.h"
#include "step/optimizer.h"
#include "test_trainer.h"

using namespace gputrain;

namespace {

Batch batch() {
  torch::manual_seed(0);
  return {torch::randn({4, 1, 8, 8}), torch::randint(0, 3, {4})};
}

// A small cnn with BatchNorm buffers, AdamW moments, a grad scaler and an EMA: every part a
// checkpoint holds.
std::unique_ptr<Trainer> make_trainer() {
  torch::manual_seed(1);
  auto model = make_model("cnn", ModelSpec{{1, 8, 8}, 3, 4});
  Recipe& ctx = test::keep({});
  ctx.precision.scaler = true;
  TrainerOptions options;
  options.ema_decay = 0.9;
  return std::make_unique<Trainer>(model, make_optimizer(optimizer_spec(Config{}), *model), ctx, options);
}

// Usage errors are the expected answer to a bad file; anything else stops the fuzzer.
template <typename F>
void expect_loaded_or_refused(F body) {
  try {
    body();
  } catch (const Error& e) {
    if (e.exit_code != kExitUsage) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seed = std::getenv("GPUTRAIN_FUZZ_SEED")) {
    auto t = make_trainer();
    t->step({batch()});
    save_checkpoint(seed, *t, {.epoch = 1, .samples = 64, .step = 1, .config_json = "{}"});
    test::write_legacy_checkpoint(std::string(seed) + ".format2", *t, {.epoch = 1, .samples = 64, .step = 1, .config_json = "{}"});
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("checkpoint", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);

  expect_loaded_or_refused([&] { read_checkpoint_meta(path); });
  expect_loaded_or_refused([&] {
    auto stored = read_checkpoint_weights(path);
    for (const auto* weights : {&stored.raw, &stored.ema})
      for (const auto& [name, tensor] : *weights) tensor.sum();  // touch every element
  });
  // A fresh trainer each time: a refused file may leave one half loaded (gputrain then exits).
  auto trainer = make_trainer();
  bool loaded = false;
  expect_loaded_or_refused([&] {
    load_checkpoint(path, *trainer);
    loaded = true;
  });
  // What loads must train: a step on the loaded weights, moments and scale.
  if (loaded) trainer->step({batch()});
  return 0;
}
