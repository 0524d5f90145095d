// Data parallel x pipeline stages, with real processes over Gloo on 127.0.0.1: 2 ranks, each
// running its batch through 2 stage threads, train the weights of one device with the global
// batch (MLP and transformer, both schedules, accumulation, uneven rank batches); a checkpoint of
// the combination resumes exactly; the benchmark reports the bubble and the all-reduce together.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "test_util.h"
#include "test_weights.h"
#include "weights/safetensors.h"

using namespace gputrain;
using test::check_same_weights;

namespace {

// No BatchNorm or dropout, one thread per process: only the sums' order differs between runs.
const std::string kData =
    "train --dataset synthetic --num_classes 5 --synthetic_train_size 1280 --synthetic_test_size 67 "
    "--optimizer adamw --lr 0.01 --clip_max_norm 1 --epochs 1 --num_workers 0 --threads 1 --no-use_amp --log_every 5 ";
const std::string kMlp = kData + "--model mlp --input_shape 32 --width 32 --max_steps 12 ";
// SGD: a key projection's bias has a gradient of zero but for rounding, which Adam's
// normalization would blow up into updates that differ with the order of the sums.
const std::string kTransformer = kData + "--model transformer --input_shape 8x4 --width 16 --depth 2 --heads 2 --max_steps 6 "
                                         "--optimizer sgd --lr 0.05 ";
const std::string kLaunch = "launch --nproc_per_node 2 -- ";

// Runs `args` with --export into dir/tag.st; the run must succeed.
std::string trained(const test::TempDir& dir, const std::string& tag, const std::string& args) {
  const std::string st = dir / (tag + ".st");
  auto r = test::run_gputrain(args + " --output_dir " + (dir / tag) + " --export " + st);
  INFO(tag << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return st;
}

}  // namespace

TEST_CASE("mesh: 2 ranks x 2 stages train the weights of one device: MLP and transformer, both schedules", "[mesh][cli]") {
  test::TempDir dir;
  for (const auto& [model, args] : {std::pair{std::string("mlp"), kMlp}, std::pair{std::string("transformer"), kTransformer}}) {
    INFO(model);
    const std::string one = trained(dir, model + "-one", args + "--batch_size 64");
    for (const char* schedule : {"1f1b", "gpipe"}) {
      INFO(schedule);
      const std::string mesh = trained(dir, model + "-" + schedule,
                                       kLaunch + args + "--batch_size 32 --pipeline_stages 2 --micro_batches 4 "
                                                        "--pipeline_schedule " + schedule);
      check_same_weights(one, mesh);
    }
  }
  // The report names both: the ranks and each rank's stages.
  const std::string out = test::read_file(dir / "mlp-1f1b/metrics.jsonl");
  CHECK_THAT(out, Catch::Contains("\"event\":\"pipeline\""));
  CHECK_THAT(out, Catch::Contains("\"ranks\":[") && Catch::Contains("\"busy\":["));
}

TEST_CASE("mesh: 2 ranks x 2 stages with accumulation and with --rank_batch_sizes train the weights of one device",
          "[mesh][cli]") {
  test::TempDir dir;
  const std::string one = trained(dir, "one", kMlp + "--batch_size 64");
  check_same_weights(one, trained(dir, "acc", kLaunch + kMlp + "--batch_size 16 --accumulation_steps 2 "
                                                          "--pipeline_stages 2 --micro_batches 4"));
  check_same_weights(one, trained(dir, "uneven", kLaunch + kMlp + "--rank_batch_sizes 48,16 "
                                                             "--pipeline_stages 2 --micro_batches 4"));
}

TEST_CASE("mesh: a checkpoint of 2 ranks x 2 stages resumes to the weights of an uninterrupted run", "[mesh][cli]") {
  test::TempDir dir;
  const std::string args = kLaunch + kData + "--model mlp --input_shape 32 --width 32 --max_steps 0 --synthetic_train_size 640 "
                           "--lr_schedule constant --batch_size 32 --pipeline_stages 2 --micro_batches 4 ";
  const std::string whole = trained(dir, "whole", args + "--epochs 2");
  auto first = test::run_gputrain(args + "--epochs 1 --output_dir " + (dir / "split"));
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  auto second = test::run_gputrain(args + "--epochs 2 --resume auto --output_dir " + (dir / "split") + " --export " +
                                   (dir / "split.st"));
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.out, Catch::Contains("resumed from"));
  check_same_weights(whole, dir / "split.st");
}

TEST_CASE("mesh: the benchmark on 2 ranks x 2 stages reports the bubble and the all-reduce together", "[mesh][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain(kLaunch + "benchmark --dataset synthetic --num_classes 5 --synthetic_train_size 512 "
                              "--synthetic_test_size 32 --model mlp --input_shape 32 --width 32 --batch_size 32 --threads 1 "
                              "--num_workers 0 --pipeline_stages 2 --micro_batches 4 --variants baseline --steps 4 "
                              "--warmup_steps 1 --repeats 1 --json " + (dir / "b.json"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("data parallel (baseline, 2 ranks):") &&
                        Catch::Contains("stages in each rank: 2 x 4 micro-batches, 1f1b: bubble") &&
                        Catch::Contains("then the gradient all-reduce"));
  const auto j = nlohmann::json::parse(test::read_file(dir / "b.json"))["data_parallel"];
  REQUIRE(j["pipeline"].is_object());
  CHECK(j["pipeline"]["stages"] == 2);
  CHECK(j["pipeline"]["bubble"].get<double>() >= 0);
  CHECK(j["allreduce_ms_per_step"].get<double>() > 0);
}

TEST_CASE("mesh: --sync_bn with stages on several ranks is refused in one line", "[mesh][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain(kLaunch + kMlp + "--batch_size 32 --pipeline_stages 2 --sync_bn --output_dir " + (dir / "r"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out + r.err, Catch::Contains("--sync_bn with --pipeline_stages 2 on 2 ranks"));
}

// Four GPUs or more: each of 2 ranks (NCCL) takes 2 consecutive GPUs for its stages, and the
// gradients summed from both stages' devices equal one GPU's with the global batch.
TEST_CASE("cuda: 2 ranks x 2 stages on 4 GPUs train the weights of one GPU", "[cuda]") {
  if (torch::cuda::device_count() < 4) {
    WARN("skipped: 2 ranks x 2 stages need 4 GPUs, this machine has " << static_cast<int>(torch::cuda::device_count()));
    return;
  }
  test::TempDir dir;
  const std::string gpu = kMlp + "--device cuda --no-tf32 ";
  const std::string one = trained(dir, "one", gpu + "--batch_size 64");
  auto mesh = test::run_gputrain(kLaunch + gpu + "--batch_size 32 --pipeline_stages 2 --micro_batches 4 --output_dir " +
                                 (dir / "mesh") + " --export " + (dir / "mesh.st"));
  INFO(mesh.out << mesh.err);
  REQUIRE(mesh.exit_code == 0);
  CHECK_THAT(mesh.out, Catch::Contains("over NCCL") && Catch::Contains("2 per rank (its stages)"));
  check_same_weights(one, dir / "mesh.st", 1e-4, 1e-5);
}

TEST_CASE("mesh: --rank_batch_sizes cut each rank's own batch into its micro-batches", "[mesh][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain(kLaunch + kMlp + "--rank_batch_sizes 60,4 --pipeline_stages 2 --max_steps 2 --output_dir " +
                              (dir / "r"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Rank 0's record: its batch of 60 in the 8 micro-batches auto gives 2 stages.
  const auto record = nlohmann::json::parse(test::read_file(dir / "r/config.json"));
  CHECK(record["resolved"]["batch_size"] == 60);
  CHECK(record["resolved"]["micro_batches"] == 8);
  // --balance auto does not measure through stages yet: refused in one line.
  auto bal = test::run_gputrain(kLaunch + kMlp + "--batch_size 32 --balance auto --pipeline_stages 2 --output_dir " +
                                (dir / "bal"));
  CHECK(bal.exit_code == 2);
  CHECK_THAT(bal.out + bal.err, Catch::Contains("--balance auto with --pipeline_stages"));
}
