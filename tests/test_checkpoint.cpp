// Checkpoints: save -> reload gives the identical next loss; bad files give clear errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <torch/optim/adamw.h>
#include <torch/torch.h>

#include "config/config.h"
#include "core/error.h"
#include "core/zip.h"
#include "test_errors.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "step/optimizer.h"
#include "test_trainer.h"

using namespace gputrain;

namespace {

std::unique_ptr<Trainer> make_trainer(uint64_t seed, bool scaler, int64_t width = 4) {
  torch::manual_seed(seed);
  auto model = make_model("cnn", ModelSpec{{1, 8, 8}, 3, width});
  Config c;  // adamw: the optimizer state (moments) must survive the round trip too
  Recipe& ctx = test::keep({});
  ctx.precision.scaler = scaler;
  return std::make_unique<Trainer>(model, make_optimizer(optimizer_spec(c), *model), ctx, TrainerOptions{});
}

Batch batch(int64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({8, 1, 8, 8}), torch::randint(0, 3, {8})};
}

}  // namespace

TEST_CASE("checkpoint: save -> reload -> identical next losses", "[checkpoint]") {
  test::TempDir dir;
  auto a = make_trainer(1, true);
  for (int s = 0; s < 3; ++s) a->step({batch(s)});
  save_checkpoint(dir / "c.pt", *a, {.epoch = 1, .step = 3, .config_json = "{\"x\": 1}"});
  CHECK_FALSE(std::filesystem::exists(dir / "c.pt.tmp"));

  auto b = make_trainer(99, true);  // different initial weights
  CheckpointMeta meta = load_checkpoint(dir / "c.pt", *b);
  CHECK(meta.epoch == 1);
  CHECK(meta.step == 3);
  CHECK(meta.config_json == "{\"x\": 1}");
  CHECK(b->scaler().get_scale() == a->scaler().get_scale());
  for (int s = 3; s < 6; ++s) {
    double la = a->step({batch(s)}).loss.item<double>();
    double lb = b->step({batch(s)}).loss.item<double>();
    CHECK(la == lb);  // bit-identical on CPU
  }
}

TEST_CASE("checkpoint: missing, truncated and foreign files are usage errors", "[checkpoint]") {
  test::TempDir dir;
  auto t = make_trainer(1, false);
  auto code_of = [&](const std::string& path) {
    try {
      load_checkpoint(path, *t);
    } catch (const Error& e) {
      return e.exit_code;
    }
    return 0;
  };
  CHECK(code_of(dir / "none.pt") == 2);
  save_checkpoint(dir / "good.pt", *t, {});
  auto bytes = test::read_file(dir / "good.pt");
  test::write_file(dir / "trunc.pt", bytes.substr(0, bytes.size() / 2));
  CHECK(code_of(dir / "trunc.pt") == 2);
  test::write_file(dir / "text.pt", "not a checkpoint");
  CHECK(code_of(dir / "text.pt") == 2);
  torch::save(torch::ones({3}), dir / "tensor.pt");  // a valid torch file, but not ours
  CHECK(code_of(dir / "tensor.pt") == 2);
  CHECK(code_of(dir / "good.pt") == 0);
}

TEST_CASE("checkpoint: a flipped bit in a weight is caught by the CRC check", "[checkpoint]") {
  test::TempDir dir;
  auto t = make_trainer(1, false);
  save_checkpoint(dir / "good.pt", *t, {});
  // Find the first tensor record (".../data/0") and flip one bit of its bytes.
  std::string bytes = test::read_file(dir / "good.pt");
  uint64_t offset = 0;
  {
    MappedFile m = map_file(dir / "good.pt");
    for (const auto& z : zip_directory("good.pt", m, ""))
      if (z.name.ends_with("/data/0")) offset = zip_member_start("good.pt", m, z, "") + z.csize / 2;
  }
  REQUIRE(offset > 0);
  bytes[offset] ^= 0x10;
  test::write_file(dir / "flipped.pt", bytes);
  CHECK_THAT(test::error_of(dir / "flipped.pt", [&] { load_checkpoint(dir / "flipped.pt", *make_trainer(1, false)); }),
             Catch::Contains("data/0: damaged (CRC-32 mismatch)"));
}

TEST_CASE("checkpoint: a tensor pointed at a smaller record is refused, even with a valid CRC", "[checkpoint]") {
  // LibTorch's reader did not check a tensor's extent against its data: the fuzz target found
  // a heap corruption from a pickle whose storage key named a smaller record. Rebuild that
  // damage here with the CRC recomputed, so that only the size check can catch it.
  test::TempDir dir;
  save_checkpoint(dir / "good.pt", *make_trainer(1, true), {});
  std::string bytes = test::read_file(dir / "good.pt");
  MappedFile m = map_file(dir / "good.pt");
  std::string pkl_name, small, large;
  uint64_t pkl_start = 0, pkl_size = 0, small_size = UINT64_MAX, large_size = 0;
  for (const auto& z : zip_directory("good.pt", m, "")) {
    if (z.name.ends_with("/data.pkl")) {
      pkl_name = z.name;
      pkl_start = zip_member_start("good.pt", m, z, "");
      pkl_size = z.csize;
    }
    auto at = z.name.find("/data/");
    if (at == std::string::npos) continue;
    std::string key = z.name.substr(at + 6);
    // Two-digit keys: the pickle keeps its length, and no module name ("features.5") matches.
    if (key.size() != 2) continue;
    if (z.usize < small_size) small = key, small_size = z.usize;
    if (z.usize > large_size) large = key, large_size = z.usize;
  }
  REQUIRE(!pkl_name.empty());
  REQUIRE(small_size < large_size);
  // Storage keys are pickled as BINUNICODE: 'X', a 4-byte length, the text.
  auto pickled = [](const std::string& key) { return std::string("X\x02\x00\x00\x00", 5) + key; };
  std::string pkl = bytes.substr(pkl_start, pkl_size);
  auto pos = pkl.find(pickled(large));
  REQUIRE(pos != std::string::npos);
  REQUIRE(pkl.find(pickled(large), pos + 1) == std::string::npos);
  pkl.replace(pos, 7, pickled(small));
  bytes.replace(pkl_start, pkl_size, pkl);
  // The central directory entry (46 bytes, then the name) holds the CRC at offset 16.
  const uint32_t crc = crc32_of(reinterpret_cast<const uint8_t*>(pkl.data()), pkl.size());
  const auto entry = bytes.rfind(pkl_name) - 46;
  for (int i = 0; i < 4; ++i) bytes[entry + 16 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  test::write_file(dir / "aliased.pt", bytes);
  CHECK_THAT(test::error_of(dir / "aliased.pt", [&] { load_checkpoint(dir / "aliased.pt", *make_trainer(1, true)); }),
             Catch::Contains("is named twice with different types or sizes"));
}

TEST_CASE("checkpoint: a storage type no model weight has is refused by export's reader", "[checkpoint]") {
  // The fuzz target found a pickle whose storage type was changed to a sub-byte integer type:
  // LibTorch loaded it, and summing it threw. Rebuilt here with a valid CRC.
  test::TempDir dir;
  save_checkpoint(dir / "good.pt", *make_trainer(1, true), {});
  std::string bytes = test::read_file(dir / "good.pt");
  MappedFile m = map_file(dir / "good.pt");
  std::string pkl_name;
  uint64_t pkl_start = 0, pkl_size = 0;
  for (const auto& z : zip_directory("good.pt", m, ""))
    if (z.name.ends_with("/data.pkl")) {
      pkl_name = z.name;
      pkl_start = zip_member_start("good.pt", m, z, "");
      pkl_size = z.csize;
    }
  REQUIRE(!pkl_name.empty());
  std::string pkl = bytes.substr(pkl_start, pkl_size);
  auto pos = pkl.find("LongStorage");  // a BatchNorm's num_batches_tracked
  REQUIRE(pos != std::string::npos);
  pkl.replace(pos, 11, "Int5Storage");  // the same length: nothing else in the file moves
  bytes.replace(pkl_start, pkl_size, pkl);
  const uint32_t crc = crc32_of(reinterpret_cast<const uint8_t*>(pkl.data()), pkl.size());
  const auto entry = bytes.rfind(pkl_name) - 46;
  for (int i = 0; i < 4; ++i) bytes[entry + 16 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  test::write_file(dir / "int5.pt", bytes);
  CHECK_THAT(test::error_of(dir / "int5.pt", [&] { read_checkpoint_weights(dir / "int5.pt"); }),
             Catch::Contains("forbidden global 'torch.Int5Storage'"));
}

TEST_CASE("checkpoint: another model's checkpoint is refused before anything changes", "[checkpoint]") {
  test::TempDir dir;
  save_checkpoint(dir / "narrow.pt", *make_trainer(1, false, 4), {});
  auto wide = make_trainer(2, false, 8);
  auto before = wide->model().parameters()[0].clone();
  std::string message = test::error_of(dir / "narrow.pt", [&] { load_checkpoint(dir / "narrow.pt", *wide); });
  CHECK_THAT(message, Catch::Contains("there but") && Catch::Contains("in this model"));
  CHECK(torch::equal(wide->model().parameters()[0], before));
}

TEST_CASE("checkpoint: all_finite sees weights, EMA and optimizer moments", "[checkpoint]") {
  torch::manual_seed(0);
  auto model = make_model("cnn", ModelSpec{{1, 8, 8}, 3, 4});
  TrainerOptions options;
  options.ema_decay = 0.9;
  Trainer t(model, make_optimizer(optimizer_spec(Config{}), *model), test::keep({}), options);
  t.step({batch(0)});
  CHECK(all_finite(t));
  // An overflowed second moment leaves the weights finite (the update divides by it).
  torch::NoGradGuard no_grad;
  auto& state = *t.optimizer().state().begin()->second;
  auto& adamw = dynamic_cast<torch::optim::AdamWParamState&>(state);
  adamw.exp_avg_sq().view(-1)[0] = INFINITY;
  CHECK_FALSE(all_finite(t));
  adamw.exp_avg_sq().view(-1)[0] = 0;
  CHECK(all_finite(t));
  t.ema()->tensors()[0].view(-1)[0] = NAN;
  CHECK_FALSE(all_finite(t));
}

TEST_CASE("checkpoint: non-finite weights and a zero loss scale are refused", "[checkpoint]") {
  test::TempDir dir;
  auto t = make_trainer(1, true);
  {
    torch::NoGradGuard no_grad;
    t->model().parameters()[0].view(-1)[0] = NAN;
  }
  save_checkpoint(dir / "nan.pt", *t, {});  // save_checkpoint's callers check all_finite first
  CHECK_THAT(test::error_of(dir / "nan.pt", [&] { load_checkpoint(dir / "nan.pt", *make_trainer(1, true)); }),
             Catch::Contains("non-finite"));

  // The scale is read into the trainer's scaler: a checkpoint rewritten with scale 0.
  save_checkpoint(dir / "good.pt", *make_trainer(1, true), {});
  CheckpointData c = read_checkpoint_file(dir / "good.pt");
  c.scale = torch::zeros({1});
  {
    std::ofstream out(dir / "zero_scale.pt", std::ios::binary);
    write_checkpoint(c, [&out](const void* data, size_t size) {
      out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
      return size;
    });
  }
  CHECK_THAT(
      test::error_of(dir / "zero_scale.pt", [&] { load_checkpoint(dir / "zero_scale.pt", *make_trainer(1, true)); }),
      Catch::Contains("scaler.scale"));
}
