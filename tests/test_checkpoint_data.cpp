// Checkpoints are data: format 3 is what torch.load(weights_only=True) reads, old formats (1, 2)
// are read without running anything and resume bit-identically, and hostile files are refused
// at once, in bounded memory, leaving nothing behind.
#include <catch2/catch.hpp>

#include <map>

#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <torch/torch.h>

#include "config/config.h"
#include "test_errors.h"
#include "test_python.h"
#include "test_util.h"
#include "test_weights.h"
#include "legacy_checkpoint.h"
#include "train/checkpoint.h"
#include "step/optimizer.h"
#include "test_trainer.h"

using namespace gputrain;
namespace fs = std::filesystem;

namespace {

// A cnn with BatchNorm buffers, fused AdamW moments, a grad scaler and an EMA: every part a
// checkpoint holds.
std::unique_ptr<Trainer> make_trainer(uint64_t seed) {
  torch::manual_seed(seed);
  auto model = make_model("cnn", ModelSpec{{1, 8, 8}, 3, 4});
  Recipe& ctx = test::keep({});
  ctx.precision.scaler = true;
  TrainerOptions options;
  options.ema_decay = 0.9;
  return std::make_unique<Trainer>(model, make_optimizer(optimizer_spec(Config{}, /*fused=*/true), *model), ctx, options);
}

Batch batch(int64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({8, 1, 8, 8}), torch::randint(0, 3, {8})};
}

// Trains `a` 3 steps, saves it with `save`, loads that into a fresh trainer, and checks that
// both go on with the same losses, weights, moving averages and loss scale.
template <class Save>
void check_resumes_identically(Save save) {
  test::TempDir dir;
  auto a = make_trainer(1);
  for (int s = 0; s < 3; ++s) a->step({batch(s)});
  save(dir / "c.pt", *a);
  auto b = make_trainer(99);
  const CheckpointMeta meta = load_checkpoint(dir / "c.pt", *b);
  CHECK(meta.step == 3);
  CHECK(meta.config_json == "{\"x\": 1}");
  CHECK(b->scaler().get_scale() == a->scaler().get_scale());
  for (int s = 3; s < 6; ++s) CHECK(a->step({batch(s)}).loss.item<double>() == b->step({batch(s)}).loss.item<double>());
  const auto pa = a->model().parameters(), pb = b->model().parameters();
  for (size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pb[i]));
  const auto ea = a->ema()->tensors(), eb = b->ema()->tensors();
  for (size_t i = 0; i < ea.size(); ++i) CHECK(torch::equal(ea[i], eb[i]));
}

}  // namespace

TEST_CASE("checkpoint data: format 3 resumes bit-identically (fused AdamW, scaler, EMA)", "[checkpoint]") {
  check_resumes_identically([](const std::string& path, Trainer& t) {
    save_checkpoint(path, t, {.epoch = 1, .samples = 24, .step = 3, .config_json = "{\"x\": 1}"});
  });
}

TEST_CASE("checkpoint data: formats 2 and 1 of the last release load as data and resume bit-identically", "[checkpoint]") {
  check_resumes_identically([](const std::string& path, Trainer& t) {
    test::write_legacy_checkpoint(path, t, {.epoch = 1, .samples = 24, .step = 3, .config_json = "{\"x\": 1}"});
  });
  test::TempDir dir;
  auto t = make_trainer(1);
  t->step({batch(0)});
  // Format 1 counted micro-batches of the run's global batch, which its config record holds.
  test::write_legacy_checkpoint(dir / "v1.pt", *t, {.epoch = 2, .step = 7, .config_json = R"({"batch_size": 16})"}, 1, 3);
  const CheckpointMeta meta = read_checkpoint_meta(dir / "v1.pt");
  CHECK(meta.epoch == 2);
  CHECK(meta.samples == 48);
  CHECK(read_checkpoint_file(dir / "v1.pt").version == 1);
}

TEST_CASE("checkpoint data: PyTorch reads format 3 with weights_only=True, into the twin and AdamW", "[checkpoint][cli][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  auto r = test::run_gputrain("train --dataset synthetic --input_shape 12 --num_classes 4 --synthetic_train_size 128 "
                              "--synthetic_test_size 32 --model mlp --width 8 --epochs 1 --batch_size 32 --num_workers 0 "
                              "--no-use_amp --output_dir " + (dir / "run") + " --export " + (dir / "w.safetensors"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::string log;
  const int code = test::python("checkpoint_check.py " + (dir / "run/checkpoints/last.pt") + " " + (dir / "w.safetensors") +
                                    " mlp 12 4 8",
                                log);
  INFO(log);
  CHECK(code == 0);
  CHECK_THAT(log, Catch::Contains("ok: 6 tensors into the mlp twin"));
}

TEST_CASE("checkpoint data: a run in flight under the last release (format 2) resumes bit-identically", "[checkpoint][cli]") {
  test::TempDir dir;
  // A constant learning rate: a run of 1 epoch then 2 sees the schedule of 2 epochs throughout.
  const std::string run = "train --preset smoke --num_workers 0 --no-use_amp --lr_schedule constant ";
  auto full = test::run_gputrain(run + "--epochs 2 --output_dir " + (dir / "full") + " --export " + (dir / "full.st"));
  INFO(full.out << full.err);
  REQUIRE(full.exit_code == 0);
  auto first = test::run_gputrain(run + "--epochs 1 --output_dir " + (dir / "split"));
  REQUIRE(first.exit_code == 0);
  const std::string last = dir / "split/checkpoints/last.pt";
  test::convert_to_format_2(last, dir / "old.pt");
  fs::rename(dir / "old.pt", last);
  REQUIRE(read_checkpoint_file(last).version == 2);
  auto second = test::run_gputrain(run + "--epochs 2 --resume auto --output_dir " + (dir / "split") + " --export " + (dir / "split.st"));
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  test::check_same_weights(dir / "full.st", dir / "split.st", 0, 0);
  // The run goes on in format 3.
  CHECK(read_checkpoint_file(last).version == 3);
}

TEST_CASE("checkpoint data: an old checkpoint whose class defines __setstate__ is refused, and nothing runs", "[checkpoint][cli][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  auto t = make_trainer(1);
  t->step({batch(0)});
  test::write_legacy_checkpoint(dir / "old.pt", *t, {.config_json = "{}"});
  std::string log;
  REQUIRE(test::python("crafted_checkpoints.py --setstate " + (dir / "old.pt") + " " + (dir / "hooked.pt"), log) == 0);
  CHECK_THAT(test::error_of(dir / "hooked.pt", [&] { load_checkpoint(dir / "hooked.pt", *make_trainer(2)); }),
             Catch::Contains("defines methods (TorchScript code"));
  auto r = test::run_gputrain("export --checkpoint " + (dir / "hooked.pt") + " --out " + (dir / "w.safetensors"),
                              "cd " + dir.path.string() + " &&");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("defines methods"));
  CHECK_FALSE(fs::exists(dir / "MARKER"));
  CHECK_FALSE(fs::exists(dir / "w.safetensors"));
}

namespace {

// Runs gputrain under GNU time (tools/setup.sh installs it): its result, wall seconds and peak
// resident memory in KiB (0 without GNU time).
struct Measured {
  test::RunResult r;
  double seconds;
  long max_rss_kib;
};
const bool kGnuTime = fs::exists("/usr/bin/time");
Measured measured(const std::string& args, const std::string& cwd) {
  test::TempDir tmp;
  const auto start = std::chrono::steady_clock::now();
  const std::string time = kGnuTime ? " && /usr/bin/time -f %M -o " + (tmp / "rss") : "";
  test::RunResult r = test::run_gputrain(args, "cd " + cwd + time);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // GNU time writes "Command exited with non-zero status 2" first: the figure is the last line.
  std::istringstream out(kGnuTime ? test::read_file(tmp / "rss") : "");
  std::string line, last = "0";
  while (std::getline(out, line))
    if (!line.empty()) last = line;
  return {r, s, std::atol(last.c_str())};
}

}  // namespace

TEST_CASE("checkpoint data: crafted files are refused on every command at once, in bounded memory, leaving nothing", "[checkpoint][cli][python]") {
  if (!test::have_python()) return;
  if (!kGnuTime) WARN("no /usr/bin/time (Debian's time): peak memory not checked");
  test::TempDir dir;
  std::string log;
  REQUIRE(test::python("crafted_checkpoints.py " + dir.path.string(), log) == 0);
  // What a refused start costs anyway: the same command on a file that does not exist (train
  // probes the machine before it reads a file, and so starts higher than export).
  std::map<std::string, long> baseline;
  const std::vector<std::pair<std::string, std::string>> files = {
      {"deep_tuples.pt", "deeper than"},     {"deep_dicts.pt", "deeper than"},
      {"laughs.pt", "one structure in two places"},
      {"flood.pt", "more objects than its file's size allows"},
      {"foreign.pt", "forbidden global 'os.system'"}, {"eval.pt", "forbidden global 'builtins.eval'"},
      {"memo.pt", "memo 4294967295 read before it was written"},
      {"bomb.pt", "claims 209715200 bytes of code"},  {"long_string.pt", "truncated pickle"},
      {"shared_params.pt", "one structure in two places"}, {"long_names.pt", "a name of 1000000 bytes"},
      {"expanded.pt", "elements overlap"},             {"format_overflow.pt", "has format 4294967299"}};
  const std::vector<std::string> commands = {
      "export --checkpoint F --out w.st", "eval --checkpoint F", "infer --checkpoint F --out p.csv",
      "train --preset smoke --init_from F --output_dir run_init", "train --preset smoke --resume F --output_dir run_resume"};
  for (std::string command : commands) {
    const std::string pattern = command;
    // The highest of three: one start's peak varies by up to 20 MiB (stop 59's CI measured a
    // train start 23 MiB under the others, and a crafted file's refusal went over by that).
    command.replace(command.find(" F"), 2, " missing.pt");
    for (int round = 0; round < 3; ++round)
      baseline[pattern] = std::max(baseline[pattern], measured(command, dir.path.string()).max_rss_kib);
    CHECK((baseline[pattern] > 0 || !kGnuTime));
  }
  for (const auto& [file, why] : files) {
    const auto size_kib = static_cast<long>(fs::file_size(dir / file) / 1024);
    for (std::string command : commands) {
      const long start = baseline[command];
      command.replace(command.find(" F"), 2, " " + file);
      INFO(command);
      const Measured m = measured(command, dir.path.string());
      INFO(m.r.out << m.r.err);
      CHECK(m.r.exit_code == 2);
      CHECK_THAT(m.r.err, Catch::StartsWith("gputrain: error: ") && Catch::Contains(why));
      CHECK(std::count(m.r.err.begin(), m.r.err.end(), '\n') <= 2);  // the error and its hint
      CHECK(m.seconds < 20);
      // Twice the file over a refused start's own peak, plus the reader's fixed allowance.
      if (kGnuTime) CHECK(m.max_rss_kib <= start + 2 * size_kib + 4 * 1024 + 2 * 1024);
      CHECK_FALSE(fs::exists(dir / "MARKER"));
      CHECK_FALSE(fs::exists(dir / "run_init"));
      CHECK_FALSE(fs::exists(dir / "run_resume"));
      CHECK_FALSE(fs::exists(dir / "w.st"));
    }
  }
}
