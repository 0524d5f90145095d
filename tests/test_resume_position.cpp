// Where a run stands, in samples of the epoch's global order: a run stopped on 2 ranks, resumed
// on 3 and finished on 1 trains every sample of every epoch once, to the weights, the learning
// rate and the test loss of the uninterrupted run; a --max_steps end inside an epoch resumes
// inside it; a checkpoint of format 1 (micro-batches) resumes exactly; a newer format is refused.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include "legacy_checkpoint.h"
#include "test_util.h"
#include "test_weights.h"

using namespace gputrain;
using test::check_same_weights;

namespace {

const std::string kMlp =
    "train --dataset synthetic --input_shape 32 --num_classes 5 --synthetic_test_size 67 --model mlp --width 32 "
    "--optimizer adamw --lr 0.01 --clip_max_norm 1 --num_workers 0 --threads 1 --no-use_amp --log_every 1 ";

std::vector<nlohmann::json> records(const std::string& run, const std::string& event) {
  std::vector<nlohmann::json> out;
  for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
    if (r["event"] == event) out.push_back(r);
  return out;
}

test::RunResult run_ok(const std::string& args, const std::string& env = "") {
  auto r = test::run_gputrain(args, env);
  INFO(args << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// Stopped by a SIGTERM each process sends itself after step `step` (GPUTRAIN_FAULT_SIGTERM_STEP).
test::RunResult run_stopped(const std::string& args, int step) {
  auto r = test::run_gputrain(args, "GPUTRAIN_FAULT_SIGTERM_STEP=" + std::to_string(step));
  INFO(args << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 143);
  return r;
}

// Rewrites a checkpoint as an old-format one (a TorchScript archive, whose attributes are the
// checkpoint's keys) tagged `format`, with the given integer fields. (torch::jit loads here only
// the archive this test just wrote.)
void rewrite_meta(const std::string& from, const std::string& to, const std::string& format,
                  const std::map<std::string, int64_t>& ints) {
  test::convert_to_format_2(from, to + ".format2");
  auto m = torch::jit::load(to + ".format2");
  m.setattr("meta.format", format);
  for (const auto& [key, value] : ints) {
    if (m.hasattr(key))
      m.setattr(key, value);
    else
      m.register_attribute(key, c10::IntType::get(), value);
  }
  m.save(to);
}

}  // namespace

TEST_CASE("resume position: 2 -> 3 -> 1 ranks train each sample of every epoch once, as the uninterrupted run",
          "[resume][dist][cli]") {
  test::TempDir dir;
  // A global batch of 96 splits over 2, 3 and 1 ranks; 1920 samples make 20 steps an epoch.
  const std::string args = kMlp + "--synthetic_train_size 1920 --epochs 3 ";
  const std::string whole = dir / "whole", split = dir / "split";
  run_ok("launch --nproc_per_node 2 -- " + args + "--batch_size 48 --output_dir " + whole + " --export " + (dir / "whole.st"));
  run_stopped("launch --nproc_per_node 2 -- " + args + "--batch_size 48 --output_dir " + split, 7);
  auto three = run_stopped("launch --nproc_per_node 3 -- " + args + "--resume auto --output_dir " + split, 31);
  CHECK_THAT(three.out, Catch::Contains("keeps the run's global batch of 96 over 3 ranks") &&
                            Catch::Contains("world size 2 -> 3: re-sharded the epoch after its first 672 samples"));
  auto one = run_ok(args + "--resume auto --output_dir " + split + " --export " + (dir / "split.st"));
  CHECK_THAT(one.out, Catch::Contains("world size 3 -> 1: re-sharded the epoch after its first 1056 samples"));

  // The same weights: every global batch of every epoch trained once, in order.
  check_same_weights(dir / "whole.st", dir / "split.st", 1e-4, 1e-5);
  // Each of the 60 steps once, 20 in each epoch, on the uninterrupted run's schedule.
  const auto a = records(whole, "step"), b = records(split, "step");
  REQUIRE(a.size() == 60);
  REQUIRE(b.size() == 60);
  std::map<int64_t, int> per_epoch;
  for (size_t i = 0; i < b.size(); ++i) {
    CHECK(b[i]["step"] == static_cast<int64_t>(i + 1));
    CHECK(b[i]["lr"].get<double>() == Approx(a[i]["lr"].get<double>()).epsilon(1e-12));
    ++per_epoch[b[i]["epoch"].get<int64_t>()];
  }
  CHECK(per_epoch == std::map<int64_t, int>{{0, 20}, {1, 20}, {2, 20}});
  const double loss_a = records(whole, "summary").back()["final_test_loss"].get<double>();
  const double loss_b = records(split, "summary").back()["final_test_loss"].get<double>();
  CHECK(std::abs(loss_b - loss_a) <= 0.02 * loss_a);
}

TEST_CASE("resume position: a global batch that does not split over the new ranks is refused with a hint",
          "[resume][dist][cli]") {
  test::TempDir dir;
  const std::string args = kMlp + "--synthetic_train_size 640 --epochs 2 --output_dir " + (dir / "run");
  run_stopped("launch --nproc_per_node 2 -- " + args + " --batch_size 32", 3);
  auto r = test::run_gputrain("launch --nproc_per_node 3 -- " + args + " --resume auto");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out + r.err, Catch::Contains("resuming a run whose global batch is 64 on 3 ranks") &&
                                Catch::Contains("hint: resume on a number of ranks that divides 64"));
}

TEST_CASE("resume position: a --max_steps end inside an epoch resumes inside it", "[resume][cli]") {
  test::TempDir dir;
  const std::string args = kMlp + "--synthetic_train_size 640 --batch_size 64 --epochs 2 --lr_schedule constant ";
  run_ok(args + "--output_dir " + (dir / "whole") + " --export " + (dir / "whole.st"));
  const std::string run = dir / "run";
  run_ok(args + "--max_steps 5 --output_dir " + run);
  CHECK(records(run, "eval").size() == 1);  // the end is evaluated
  // The same steps again: nothing is left, no step and no evaluation added.
  run_ok(args + "--max_steps 5 --resume auto --output_dir " + run);
  CHECK(records(run, "step").size() == 5);
  CHECK(records(run, "eval").size() == 1);
  auto more = run_ok(args + "--max_steps 0 --resume auto --output_dir " + run + " --export " + (dir / "run.st"));
  CHECK_THAT(more.out, Catch::Contains("epoch 1, batch 5, step 5"));
  check_same_weights(dir / "whole.st", dir / "run.st");
  CHECK(records(run, "step").size() == 20);
}

TEST_CASE("resume position: a checkpoint of format 1 resumes exactly, and a newer format is refused, not passed over",
          "[resume][cli]") {
  test::TempDir dir;
  const std::string args = kMlp + "--synthetic_train_size 640 --batch_size 64 --epochs 2 ";
  run_ok(args + "--output_dir " + (dir / "whole") + " --export " + (dir / "whole.st"));
  const std::string run = dir / "run";
  run_stopped(args + "--output_dir " + run, 3);
  const std::string last = run + "/checkpoints/last.pt";
  // Format 1 counted micro-batches; a wrong samples count shows if it were read.
  rewrite_meta(last, dir / "v1.pt", "gputrain-checkpoint-1", {{"meta.batch", 3}, {"meta.samples", 999}});
  std::filesystem::copy_file(dir / "v1.pt", last, std::filesystem::copy_options::overwrite_existing);
  auto resumed = run_ok(args + "--resume auto --output_dir " + run + " --export " + (dir / "run.st"));
  CHECK_THAT(resumed.out, Catch::Contains("epoch 1, batch 3, step 3"));
  check_same_weights(dir / "whole.st", dir / "run.st");

  const std::string newer = dir / "newer";
  run_stopped(args + "--output_dir " + newer, 3);
  rewrite_meta(newer + "/checkpoints/last.pt", dir / "v9.pt", "gputrain-checkpoint-9", {});
  std::filesystem::copy_file(dir / "v9.pt", newer + "/checkpoints/last.pt", std::filesystem::copy_options::overwrite_existing);
  auto refused = test::run_gputrain(args + "--resume auto --output_dir " + newer);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("has format 9; this gputrain reads versions 1 to 3") &&
                              Catch::Contains("hint: continue the run with the gputrain that wrote it"));
  CHECK(records(newer, "step").size() == 3);  // nothing trained, nothing passed over
}
