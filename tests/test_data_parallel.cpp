// Data parallel with real processes over Gloo on 127.0.0.1 (`gputrain launch`): 2 ranks x 32
// train the same weights as 1 process x 64, with accumulation too; rank 0 alone writes the run
// folder; a signal stops every rank at the same step with a checkpoint; a dead rank fails the job.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "test_util.h"
#include "test_weights.h"
#include "train/checkpoint_file.h"
#include "weights/safetensors.h"

using namespace gputrain;
using test::check_same_weights;

namespace {

// An MLP without BatchNorm or dropout on synthetic data, 20 steps, one thread per process.
const std::string kMlp =
    "train --dataset synthetic --input_shape 32 --num_classes 5 --synthetic_train_size 1280 --synthetic_test_size 67 "
    "--model mlp --width 32 --optimizer adamw --lr 0.01 --clip_max_norm 1 --max_steps 20 --epochs 1 --num_workers 0 "
    "--threads 1 --no-use_amp --log_every 5 ";

std::vector<nlohmann::json> steps_of(const std::string& run) {
  std::vector<nlohmann::json> out;
  for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
    if (r["event"] == "step") out.push_back(r);
  return out;
}

}  // namespace

TEST_CASE("data parallel: 2 ranks x 32 train the weights of 1 process x 64, with accumulation too", "[dist][cli]") {
  test::TempDir dir;
  auto one = test::run_gputrain(kMlp + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  auto two = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--batch_size 32 --output_dir " + (dir / "two") +
                                " --export " + (dir / "two.st"));
  INFO(two.out << two.err);
  REQUIRE(two.exit_code == 0);
  check_same_weights(dir / "one.st", dir / "two.st");
  // The logged loss is the mean over the ranks: the one-process loss.
  auto s1 = steps_of(dir / "one"), s2 = steps_of(dir / "two");
  REQUIRE(s1.size() == s2.size());
  for (size_t i = 0; i < s1.size(); ++i) CHECK(s2[i]["loss"].get<double>() == Approx(s1[i]["loss"].get<double>()).epsilon(1e-5));
  // Rank 0 owns the folder and prints; rank 1 prints nothing but errors.
  CHECK_THAT(two.out, Catch::Contains("[rank0] ") && !Catch::Contains("[rank1] "));
  CHECK_THAT(two.out, Catch::Contains("data parallel         2 ranks over Gloo"));
  // Evaluation is sharded (34 + 33 samples) and summed: the one-process metrics.
  auto eval_of = [](const std::string& run) {
    for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
      if (r["event"] == "eval") return r;
    return nlohmann::json();
  };
  const auto e1 = eval_of(dir / "one"), e2 = eval_of(dir / "two");
  REQUIRE(e2.contains("test_loss"));
  CHECK(e2["samples"] == 67);
  CHECK(e2["test_accuracy"] == e1["test_accuracy"]);
  CHECK(e2["test_loss"].get<double>() == Approx(e1["test_loss"].get<double>()).epsilon(1e-5));

  auto acc = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--batch_size 16 --accumulation_steps 2 --output_dir " +
                                (dir / "acc") + " --export " + (dir / "acc.st"));
  INFO(acc.out << acc.err);
  REQUIRE(acc.exit_code == 0);
  check_same_weights(dir / "one.st", dir / "acc.st");

  // Buckets of one parameter each (launched from autograd during backward), and one bucket
  // after backward: the same sums.
  for (const char* mb : {"0.001", "0"}) {
    auto b = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--batch_size 32 --ddp_bucket_mb " + mb +
                                " --output_dir " + (dir / "b") + mb + " --export " + (dir / "b") + mb + ".st");
    INFO(b.out << b.err);
    REQUIRE(b.exit_code == 0);
    check_same_weights(dir / "one.st", dir / "b" + std::string(mb) + ".st");
  }
}

TEST_CASE("data parallel: under torchrun --no-python, one run folder", "[dist][cli]") {
  test::TempDir dir;
  const std::string torchrun = std::string(GPUTRAIN_SOURCE_DIR) + "/.venv/bin/torchrun";
  REQUIRE(std::filesystem::exists(torchrun));  // tools/setup.sh makes the .venv
  const std::string run = dir / "run";
  const std::string cmd = torchrun + " --no-python --nproc_per_node 2 " + test::gputrain_exe() +
                          " train --preset smoke --epochs 1 --output_dir " + run + " >" + (dir / "out") + " 2>&1";
  const int status = std::system(cmd.c_str());
  INFO(test::read_file(dir / "out"));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(std::filesystem::exists(run + "/checkpoints/last.pt"));
  CHECK_THAT(test::read_file(run + "/config.json"), Catch::Contains("\"device\""));
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), std::filesystem::directory_iterator()) == 2);  // run, out
}

TEST_CASE("data parallel: SIGTERM to the launcher stops every rank at one step, rank 0 saves, exit 143", "[dist][cli]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  const std::string cmd = std::string(test::gputrain_exe()) + " launch --nproc_per_node 2 -- train --preset smoke --epochs 50 " +
                          "--log_every 3 --num_workers 0 --output_dir " + run + " >" + (dir / "out") + " 2>&1";
  const pid_t pid = test::start_shell("exec " + cmd);
  REQUIRE(test::wait_for_step(run));  // training has begun: stop the job
  const int code = test::sigterm_and_wait(pid);
  INFO(test::read_file(dir / "out"));
  CHECK(code == 143);
  CHECK(std::filesystem::exists(run + "/checkpoints/last.pt"));
  int64_t stopped_at = -1;
  for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
    if (r["event"] == "stopped" && r["reason"] == "SIGTERM") stopped_at = r["step"].get<int64_t>();
  REQUIRE(stopped_at > 0);

  // --resume auto on 2 ranks continues from that step; then one process continues the 2-rank
  // run, re-sharding the epoch.
  const std::string copy = dir / "copy";
  std::filesystem::copy(run, copy, std::filesystem::copy_options::recursive);
  const std::string more = " --resume auto --num_workers 0 --max_steps " + std::to_string(stopped_at + 3) + " --output_dir ";
  auto final_step = [](const std::string& folder) {
    int64_t step = -1;
    for (const auto& r : test::read_jsonl(folder + "/metrics.jsonl"))
      if (r["event"] == "summary") step = r["step"].get<int64_t>();
    return step;
  };
  auto two = test::run_gputrain("launch --nproc_per_node 2 -- train" + more + run);
  INFO(two.out << two.err);
  REQUIRE(two.exit_code == 0);
  CHECK_THAT(two.out, Catch::Contains("[rank0] resumed from") && Catch::Contains("step " + std::to_string(stopped_at)));
  CHECK(final_step(run) == stopped_at + 3);
  auto one = test::run_gputrain("train" + more + copy);
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  // (A stop that fell on an epoch's end resumes at the next one: nothing to re-shard.)
  if (stopped_at % 8 != 0) CHECK_THAT(one.out, Catch::Contains("world size 2 -> 1: re-sharded the epoch after its first"));
  CHECK(final_step(copy) == stopped_at + 3);
}

TEST_CASE("data parallel: a rank killed mid-run fails the job within the timeout, nothing left running", "[dist][cli]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  const std::string cmd = std::string(test::gputrain_exe()) + " launch --nproc_per_node 2 -- train --preset smoke --epochs 50 " +
                          "--log_every 2 --num_workers 0 --dist_timeout 30 --output_dir " + run + " >" + (dir / "out") + " 2>&1";
  const pid_t pid = test::start_shell("exec " + cmd);
  REQUIRE(test::wait_for_step(run));
  // Rank 1 is the launcher's child with RANK=1 in its environment.
  const pid_t rank1 = test::child_with_env(pid, "RANK=1");
  REQUIRE(rank1 > 0);
  kill(rank1, SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(test::read_file(dir / "out"));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 60);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(std::system(("pgrep -f '[o]utput_dir " + run + "' >/dev/null").c_str()) != 0);
}

TEST_CASE("data parallel: uneven --rank_batch_sizes 48,16 train the weights of 1 process x 64", "[dist][cli]") {
  test::TempDir dir;
  auto one = test::run_gputrain(kMlp + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  REQUIRE(one.exit_code == 0);
  auto uneven = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--rank_batch_sizes 48,16 --output_dir " +
                                   (dir / "uneven") + " --export " + (dir / "uneven.st"));
  INFO(uneven.out << uneven.err);
  REQUIRE(uneven.exit_code == 0);
  check_same_weights(dir / "one.st", dir / "uneven.st");
  CHECK_THAT(uneven.out, Catch::Contains("rank 0's of --rank_batch_sizes 48,16"));
  // Each log line and step record shows every rank's batch, step time and wait for the others.
  CHECK_THAT(uneven.out, Catch::Contains("| batch/wait ms by rank: 48/"));
  const auto step = steps_of(dir / "uneven").back();
  REQUIRE(step["ranks"].size() == 2);
  CHECK(step["ranks"][0]["batch"] == 48);
  CHECK(step["ranks"][1]["batch"] == 16);
  CHECK(step["ranks"][1]["step_ms"].get<double>() > 0);
  CHECK(step["ranks"][1]["allreduce_ms"].get<double>() >= 0);

  auto wrong = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--rank_batch_sizes 48,16,8");
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.err, Catch::Contains("--rank_batch_sizes '48,16,8' names 3 ranks; this job has 2"));
  auto bad = test::run_gputrain(kMlp + "--rank_batch_sizes 48,x");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("'x' is not a batch size"));
}

TEST_CASE("data parallel: a NaN on one rank makes every rank exit 3", "[dist][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--batch_size 32 --max_bad_steps 3 --output_dir " +
                                  (dir / "run"),
                              "GPUTRAIN_FAULT_NAN_STEP=4 GPUTRAIN_FAULT_NAN_RANK=1");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  // Both ranks gave up on their own with the non-finite error (none was killed by the other's exit).
  CHECK_THAT(r.err, Catch::Contains("[rank0] gputrain: error: the loss was not finite") &&
                        Catch::Contains("[rank1] gputrain: error: the loss was not finite"));
}

TEST_CASE("data parallel: --balance auto gives a slowed rank a smaller batch, and the update is one batch's", "[dist][cli]") {
  test::TempDir dir;
  auto one = test::run_gputrain(kMlp + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  REQUIRE(one.exit_code == 0);
  auto bal = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--batch_size 32 --balance auto --output_dir " +
                                    (dir / "bal") + " --export " + (dir / "bal.st"),
                                "GPUTRAIN_FAULT_SLOW_RANK=1");
  INFO(bal.out << bal.err);
  REQUIRE(bal.exit_code == 0);
  auto config = nlohmann::json::parse(test::read_file(dir / "bal/config.json"));
  const std::string sizes = config["resolved"]["rank_batch_sizes"];
  CHECK_THAT(config["reasons"]["rank_batch_sizes"].get<std::string>(), Catch::StartsWith("balance auto: step times"));
  CHECK(config["resolved"]["balance"] == "auto");  // a mode that ran, with its reason, not n/a
  CHECK(config["reasons"].contains("balance"));
  const int64_t b0 = std::stoll(sizes.substr(0, sizes.find(','))), b1 = std::stoll(sizes.substr(sizes.find(',') + 1));
  CHECK(b0 + b1 == 64);
  CHECK(b0 > b1);  // rank 1 runs at a quarter of the speed
  check_same_weights(dir / "one.st", dir / "bal.st");
}

TEST_CASE("data parallel: each rank resumes its own random stream: 1 + 1 epochs with dropout train the weights of 2", "[dist][cli]") {
  test::TempDir dir;
  const std::string kDropout =
      "launch --nproc_per_node 2 -- train --dataset synthetic --input_shape 12x5 --num_classes 5 "
      "--synthetic_train_size 256 --synthetic_test_size 32 --model transformer --width 16 --heads 2 --dropout 0.3 "
      "--optimizer adamw --lr 0.01 --lr_schedule constant --batch_size 16 --num_workers 0 --threads 1 --no-use_amp ";
  auto full = test::run_gputrain(kDropout + "--epochs 2 --output_dir " + (dir / "full") + " --export " + (dir / "full.st"));
  INFO(full.out << full.err);
  REQUIRE(full.exit_code == 0);
  auto first = test::run_gputrain(kDropout + "--epochs 1 --output_dir " + (dir / "split"));
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  // The checkpoint holds both ranks' generators, and they differ: the ranks draw different masks.
  const torch::Tensor rows = read_checkpoint_file(dir / "split/checkpoints/last.pt").meta.rank_rng.cpu;
  REQUIRE(rows.defined());
  REQUIRE(rows.size(0) == 2);
  CHECK_FALSE(torch::equal(rows[0], rows[1]));
  auto second = test::run_gputrain(kDropout + "--epochs 2 --resume auto --output_dir " + (dir / "split") + " --export " +
                                   (dir / "split.st"));
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  check_same_weights(dir / "full.st", dir / "split.st");
}

TEST_CASE("data parallel: benchmark on 2 ranks adds the data-parallel row", "[dist][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain("launch --nproc_per_node 2 -- benchmark --preset smoke --variants all --warmup_steps 1 "
                              "--steps 4 --json " + (dir / "b.json"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[rank0] data parallel (all, 2 ranks):") && Catch::Contains("scaling efficiency") &&
                        !Catch::Contains("[rank1] "));
  const auto j = nlohmann::json::parse(test::read_file(dir / "b.json"))["data_parallel"];
  REQUIRE(j["world_size"] == 2);
  CHECK(j["rank_batch_sizes"] == nlohmann::json({32, 32}));
  const auto together = j["samples_per_sec_per_rank"].get<std::vector<double>>();
  const auto alone = j["samples_per_sec_alone_per_rank"].get<std::vector<double>>();
  REQUIRE(together.size() == 2);
  REQUIRE(alone.size() == 2);
  CHECK(together[0] > 0);
  CHECK(alone[1] > 0);
  CHECK(j["samples_per_sec"].get<double>() == Approx(together[0] + together[1]));
  CHECK(j["scaling_efficiency"].get<double>() == Approx(j["samples_per_sec"].get<double>() / (alone[0] + alone[1])));
  CHECK(j["allreduce_ms_per_step"].get<double>() > 0);
  CHECK(j["overlap_fraction"].get<double>() >= 0);
  CHECK(j["overlap_fraction"].get<double>() <= 1);
  CHECK(nlohmann::json::parse(test::read_file(dir / "b.json"))["variants"].size() == 2);  // the table, rank 0's
  // The same job with the state sharded: rank 0 keeps about half the optimizer state, and with
  // --shard gradients about half the gradients.
  const auto& rows = j["sharding"];
  REQUIRE(rows.size() == 3);
  CHECK(rows[1]["shard"] == "optimizer");
  CHECK(rows[2]["samples_per_sec"].get<double>() > 0);
  // Alternating rounds, each mode's figure the median of its own.
  auto rounds = rows[1]["samples_per_sec_rounds"].get<std::vector<double>>();
  REQUIRE(rounds.size() == 3);
  std::sort(rounds.begin(), rounds.end());
  CHECK(rows[1]["samples_per_sec"].get<double>() == rounds[1]);
  const double none = rows[0]["optimizer_state_bytes_rank0"].get<double>();
  CHECK(rows[1]["optimizer_state_bytes_rank0"].get<double>() == Approx(none / 2).epsilon(0.01));
  CHECK(rows[2]["gradient_bytes_rank0"].get<double>() ==
        Approx(rows[0]["gradient_bytes_rank0"].get<double>() / 2).epsilon(0.01));
  CHECK_THAT(r.out, Catch::Contains("--shard optimizer"));
}

TEST_CASE("data parallel: --sync_bn makes 2 ranks x 32 of a BatchNorm CNN train the weights and statistics of 1 x 64",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string cnn =
      "train --dataset synthetic --input_shape 1x16x16 --num_classes 4 --synthetic_train_size 512 --synthetic_test_size 64 "
      "--model cnn --width 8 --optimizer sgd --lr 0.05 --max_steps 8 --epochs 1 --num_workers 0 --threads 1 --no-use_amp "
      "--log_every 4 ";
  auto one = test::run_gputrain(cnn + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  REQUIRE(one.exit_code == 0);
  auto sync = test::run_gputrain("launch --nproc_per_node 2 -- " + cnn + "--batch_size 32 --sync_bn --output_dir " +
                                 (dir / "sync") + " --export " + (dir / "sync.st"));
  INFO(sync.out << sync.err);
  REQUIRE(sync.exit_code == 0);
  CHECK_THAT(sync.out, Catch::Contains("2 BatchNorm layers use the global batch's statistics"));
  check_same_weights(dir / "one.st", dir / "sync.st");  // running means and variances included
  // Without it each rank normalizes by its own 32 samples, as DDP does: other weights.
  auto local = test::run_gputrain("launch --nproc_per_node 2 -- " + cnn + "--batch_size 32 --output_dir " + (dir / "local") +
                                  " --export " + (dir / "local.st"));
  REQUIRE(local.exit_code == 0);
  CHECK_FALSE(torch::allclose(load_safetensors(dir / "one.st").at("features.1.running_mean"),
                              load_safetensors(dir / "local.st").at("features.1.running_mean"), 1e-5, 1e-6));
  // One process: nothing to synchronize, said in one line.
  auto alone = test::run_gputrain(cnn + "--batch_size 64 --sync_bn --max_steps 1 --output_dir " + (dir / "alone"));
  CHECK(alone.exit_code == 0);
  CHECK_THAT(alone.out, Catch::Contains("sync_bn               true -> false (one process: its batch is the global batch)"));
}

// Two GPUs or more: the same equivalences over NCCL (device tensors, buckets from autograd
// hooks on the GPU, BatchNorm sums on the device), and an AMP run where the ranks agree on
// found_inf. The sums run in another order than one GPU's, so the tolerance is looser.
TEST_CASE("cuda: 2 GPUs over NCCL train the weights of 1 GPU x 64, --sync_bn and AMP too", "[cuda]") {
  if (torch::cuda::device_count() < 2) {
    WARN("skipped: NCCL data parallel needs 2 GPUs, this machine has " << static_cast<int>(torch::cuda::device_count()));
    return;
  }
  test::TempDir dir;
  const std::string gpu = "--device cuda --no-tf32 ";
  auto one = test::run_gputrain(kMlp + gpu + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  for (const char* mb : {"25", "0.001"}) {
    auto two = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + gpu + "--batch_size 32 --ddp_bucket_mb " + mb +
                                  " --output_dir " + (dir / "two") + mb + " --export " + (dir / "two") + mb + ".st");
    INFO(two.out << two.err);
    REQUIRE(two.exit_code == 0);
    CHECK_THAT(two.out, Catch::Contains("data parallel         2 ranks over NCCL"));
    check_same_weights(dir / "one.st", dir / "two" + std::string(mb) + ".st", 1e-4, 1e-5);
  }
  const std::string cnn =
      "train --dataset synthetic --input_shape 1x16x16 --num_classes 4 --synthetic_train_size 512 --synthetic_test_size 64 "
      "--model cnn --width 8 --optimizer sgd --lr 0.05 --max_steps 8 --epochs 1 --num_workers 0 --threads 1 --no-use_amp "
      "--log_every 4 " + gpu;
  auto bn1 = test::run_gputrain(cnn + "--batch_size 64 --output_dir " + (dir / "bn1") + " --export " + (dir / "bn1.st"));
  REQUIRE(bn1.exit_code == 0);
  auto bn2 = test::run_gputrain("launch --nproc_per_node 2 -- " + cnn + "--batch_size 32 --sync_bn --output_dir " +
                                (dir / "bn2") + " --export " + (dir / "bn2.st"));
  INFO(bn2.out << bn2.err);
  REQUIRE(bn2.exit_code == 0);
  check_same_weights(dir / "bn1.st", dir / "bn2.st", 1e-4, 1e-5);
  auto amp = test::run_gputrain("launch --nproc_per_node 2 -- train --preset smoke --device cuda --use_amp --output_dir " +
                                (dir / "amp"));
  INFO(amp.out << amp.err);
  CHECK(amp.exit_code == 0);
}
