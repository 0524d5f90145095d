// Sharded data parallel (--shard optimizer|gradients, ZeRO-1/2) with real processes over Gloo:
// the weights after N steps equal unsharded data parallel's; each rank keeps its slice of the
// optimizer state; sharded checkpoints resume on another number of ranks and another --shard
// exactly; missing or foreign shard files and a crash inside a save are handled.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "parallel/launcher.h"
#include "test_tokens.h"
#include "test_util.h"
#include "test_weights.h"
#include "train/checkpoint_file.h"
#include "weights/safetensors.h"

using namespace gputrain;
using test::check_same_weights;
namespace fs = std::filesystem;

namespace {

// Epochs of 20 steps of a global batch of 48 (2 x 24, 3 x 16), AdamW with clipping.
const std::string kMlp =
    "train --dataset synthetic --input_shape 32 --num_classes 5 --synthetic_train_size 960 --synthetic_test_size 40 "
    "--model mlp --width 32 --optimizer adamw --lr 0.01 --weight_decay 0.05 --clip_max_norm 0.5 "
    "--lr_schedule constant --num_workers 0 --threads 1 --no-use_amp --log_every 5 ";

std::string launch(int ranks) { return fmt::format("launch --nproc_per_node {} -- ", ranks); }

// The shard folders of the saves of checkpoint `name` (each of last.pt, epoch-N.pt and best.pt has
// its own), or of all of them.
std::vector<fs::path> shard_folders(const std::string& run, const std::string& name = "last.pt") {
  std::vector<fs::path> out;
  const fs::path shards = fs::path(run) / "checkpoints" / "shards";
  if (fs::is_directory(shards))
    for (const auto& e : fs::directory_iterator(shards))
      if (name.empty() || e.path().filename().string().rfind(name + "-", 0) == 0) out.push_back(e.path());
  return out;
}

// Trains `base` without sharding and with --shard `shard`, each exporting its weights; returns
// the two exports' paths (unsharded first).
std::pair<std::string, std::string> train_unsharded_and(const std::string& shard, const std::string& base,
                                                        const test::TempDir& dir, const std::string& name) {
  const std::string a = dir / (name + "none.st"), b = dir / (name + shard + ".st");
  auto none = test::run_gputrain(base + "--output_dir " + (dir / (name + "none")) + " --export " + a);
  INFO(none.out << none.err);
  REQUIRE(none.exit_code == 0);
  auto sharded = test::run_gputrain(base + "--shard " + shard + " --output_dir " + (dir / (name + shard)) + " --export " + b);
  INFO(base << "--shard " << shard << "\n" << sharded.out << sharded.err);
  REQUIRE(sharded.exit_code == 0);
  return {a, b};
}

size_t checkpoints_in(const std::string& run) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(run) / "checkpoints")) n += e.path().extension() == ".pt";
  return n;
}

}  // namespace

TEST_CASE("sharded data parallel: optimizer and gradients on 2 and 3 ranks train the weights of unsharded data parallel",
          "[dist][cli]") {
  test::TempDir dir;
  auto ref = test::run_gputrain(launch(2) + kMlp + "--epochs 1 --batch_size 24 --output_dir " + (dir / "ref") + " --export " +
                                (dir / "ref.st"));
  INFO(ref.out << ref.err);
  REQUIRE(ref.exit_code == 0);
  struct Case {
    int ranks;
    std::string flags;
  };
  const std::vector<Case> cases = {
      {2, "--shard optimizer --batch_size 24"},
      // Reduced and freed every micro-batch, a bucket per parameter: six buckets through the two
      // sets of staging buffers, each launch past the second waiting for the oldest.
      {2, "--shard gradients --batch_size 12 --accumulation_steps 2 --ddp_bucket_mb 0.001"},
      {3, "--shard optimizer --batch_size 8 --accumulation_steps 2 --ddp_bucket_mb 0.001"},  // a bucket per parameter
      {3, "--shard gradients --batch_size 16 --ddp_bucket_mb 0"},  // one bucket after backward
  };
  for (const auto& c : cases) {
    const std::string name = fmt::format("r{}{}", c.ranks, c.flags.substr(8, 3));
    auto r = test::run_gputrain(launch(c.ranks) + kMlp + "--epochs 1 " + c.flags + " --output_dir " + (dir / name) + " --export " +
                                (dir / (name + ".st")));
    INFO(c.flags << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    check_same_weights(dir / "ref.st", dir / (name + ".st"));
    CHECK_THAT(r.out, Catch::Contains("gradients reduce-scattered") && Catch::Contains("sharding"));
    // One bucket over 3 ranks: 2277 elements, each parameter from a multiple of 16 (64 bytes),
    // in slices of 768 (a multiple of 16): rank 0's holds 757 elements, a third of the state.
    if (c.flags.ends_with("--ddp_bucket_mb 0"))
      CHECK_THAT(r.out, Catch::Contains("rank 0 updates 757 of the 2277 trainable elements") &&
                            Catch::Contains("gradients 3.0 KiB, adamw state 5.9 KiB (two moments) on rank 0"));
  }
  // The report: rank 0's slice of 32x32+32 + 32x32+32 + 32x5+5 = 2277 elements (padded to 2278),
  // and the bytes per rank: AdamW's two moments halved; with gradients the gradients too.
  for (const std::string mode : {"optimizer", "gradients"}) {
    auto r = test::run_gputrain(launch(2) + kMlp + "--shard " + mode + " --batch_size 24 --max_steps 1");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("rank 0 updates 1141 of the 2277 trainable elements"));
    CHECK_THAT(r.out, Catch::Contains(fmt::format("parameters 8.9 KiB, gradients {} KiB, adamw state 8.9 KiB (two moments) "
                                                  "on rank 0 (--shard {}); each rank of data parallel without it: "
                                                  "parameters 8.9 KiB, gradients 8.9 KiB, adamw state 17.8 KiB",
                                                  mode == "optimizer" ? "8.9" : "4.5", mode)));
  }
}

TEST_CASE("sharded data parallel: with uneven --rank_batch_sizes, a frozen layer and an EMA, the weights of unsharded",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string flags = "--epochs 1 --rank_batch_sizes 32,16 --freeze fc1 --ema_decay 0.9 ";
  auto none = test::run_gputrain(launch(2) + kMlp + flags + "--output_dir " + (dir / "none") + " --export " +
                                 (dir / "none.st"));
  REQUIRE(none.exit_code == 0);
  auto sharded = test::run_gputrain(launch(2) + kMlp + flags + "--shard gradients --output_dir " + (dir / "sharded") +
                                    " --export " + (dir / "sharded.st"));
  INFO(sharded.out << sharded.err);
  REQUIRE(sharded.exit_code == 0);
  check_same_weights(dir / "none.st", dir / "sharded.st");
  // fc1 is frozen: the slices cover the 1221 elements of fc2 and fc3 alone, and so does each
  // rank's share of the average.
  CHECK_THAT(sharded.out, Catch::Contains("rank 0 updates 613 of the 1221 trainable elements") &&
                              Catch::Contains("the EMA of those slices alone"));
  // Rank 0's average: fc1's 1056 elements whole and its 611 of the rest, 6668 bytes; 2277 x 4
  // without sharding.
  CHECK_THAT(sharded.out, Catch::Contains("(two moments), ema 6.5 KiB on rank 0 (--shard gradients)") &&
                              Catch::Contains("(two moments), ema 8.9 KiB"));
  // The average's evaluation (gathered from the slices on every rank) is the unsharded one's.
  auto ema_line = [](const std::string& out) {
    const auto at = out.find("ema: test");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  CHECK(!ema_line(none.out).empty());
  CHECK(ema_line(sharded.out) == ema_line(none.out));
  const CheckpointData a = read_checkpoint_file(dir / "none/checkpoints/last.pt");
  const CheckpointData b = read_checkpoint_file(dir / "sharded/checkpoints/last.pt");
  REQUIRE(a.ema.size() == b.ema.size());
  for (size_t i = 0; i < a.ema.size(); ++i) CHECK(torch::allclose(a.ema[i].second, b.ema[i].second, 1e-5, 1e-6));
}

TEST_CASE("sharded data parallel: a resnet and the transformer train the weights of unsharded data parallel",
          "[dist][cli]") {
  test::TempDir dir;
  struct Case {
    std::string model;
    int ranks;
    std::string shard;
  };
  // AdamW with clipping and accumulation: the slices are cut at multiples of 64 bytes from each
  // parameter's start (parallel/shard_layout.h) and the global norm is summed in double, so on 2
  // ranks `optimizer` updates every element as unsharded does, bit for bit: the attention's key
  // bias included, whose gradient is zero in exact arithmetic (softmax ignores a shift) and whose
  // Adam steps are its rounding noise divided by its own size.
  // With `gradients` (each micro-batch reduced on its own) or on 3 ranks (the sums grouped in
  // another order than Gloo's all-reduce groups them) the gradients differ in their last bits.
  // There the transformer trains with SGD (Adam would turn the key bias's other rounding noise
  // into steps of the learning rate) and the resnet with AdamW at lr 0.001: at 0.01 Adam moves
  // every weight of this 4-channel resnet by the learning rate whatever its gradient's size, and
  // last-bit differences grow to 1e-3 in 20 steps while the losses stay equal to 4 digits.
  const std::string resnet = "--dataset synthetic --input_shape 3x16x16 --num_classes 4 --model resnet18 --width 4 "
                             "--optimizer adamw --weight_decay 1e-4 --clip_max_norm 0.5 ";
  const std::string transformer = "--dataset synthetic --input_shape 12x5 --num_classes 5 --model transformer --width 16 "
                                  "--heads 2 --clip_max_norm 0.5 ";
  const std::vector<Case> cases = {
      {resnet + "--lr 0.01", 2, "optimizer"},
      {resnet + "--lr 0.001", 3, "gradients"},
      {transformer + "--optimizer adamw --lr 0.01 --weight_decay 1e-4", 2, "optimizer"},
      {transformer + "--optimizer sgd --momentum 0.9 --lr 0.05", 3, "gradients"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    INFO(c.model << " on " << c.ranks << " ranks, --shard " << c.shard);
    // A global batch of 48: 2 ranks x 12 or 3 x 8, in 2 micro-batches; 20 steps.
    const std::string base = launch(c.ranks) + "train " + c.model +
                             fmt::format(" --synthetic_train_size 960 --synthetic_test_size 16 --batch_size {} "
                                         "--accumulation_steps 2 --max_steps 20 --epochs 1 --num_workers 0 --threads 1 "
                                         "--no-use_amp --lr_schedule constant ",
                                         24 / c.ranks);
    const auto [a, b] = train_unsharded_and(c.shard, base, dir, fmt::format("c{}", i));
    // BatchNorm statistics included. Where the sums are grouped otherwise (3 ranks, `gradients`),
    // 20 Adam steps leave last-bit differences up to 2e-6 on a weight (an Intel Xeon with
    // AVX-512; an AMD EPYC stayed under 1e-6): 1e-4 of how far the weights moved.
    check_same_weights(a, b, 1e-5, c.ranks == 2 && c.shard == "optimizer" ? 1e-6 : 1e-5);
  }
}

TEST_CASE("sharded data parallel: GPT (a tied head) trains the weights of unsharded data parallel: AdamW with clipping "
          "on 2 ranks, gradient checkpointing on 3",
          "[dist][cli]") {
  test::TempDir dir;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 3000; ++i) ids.push_back((i * 7 + i / 13) % 60);
  test::write_llmc(dir / "train.bin", ids);
  const std::string gpt = "train --dataset tokens --model gpt --width 16 --heads 2 --depth 2 --seq_len 8 --vocab_size 64 "
                          "--no-use_amp --num_workers 0 --threads 1 --lr_schedule constant --train_file " +
                          (dir / "train.bin") + " ";
  struct Case {
    int ranks;
    std::string flags, shard;
  };
  const std::vector<Case> cases = {
      // Bit-equal on 2 ranks (as the transformer above): the key bias's Adam steps included.
      {2, "--optimizer adamw --lr 0.01 --weight_decay 0.1 --clip_max_norm 0.5 --batch_size 3 --accumulation_steps 2 "
          "--max_steps 20",
       "optimizer"},
      // SGD: the attention's key bias again (see the transformer above).
      {3, "--optimizer sgd --momentum 0.9 --lr 0.05 --batch_size 2 --accumulation_steps 2 --max_steps 6 --grad_checkpointing",
       "gradients"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto [a, b] = train_unsharded_and(c.shard, launch(c.ranks) + gpt + c.flags + " ", dir, fmt::format("c{}", i));
    if (c.ranks == 2)
      check_same_weights(a, b, 0, 0);
    else
      check_same_weights(a, b);
  }
}

TEST_CASE("sharded data parallel: checkpoints reshard 2 -> 3 -> 1 ranks across --shard values and continue exactly",
          "[dist][cli]") {
  test::TempDir dir;
  // 3 epochs of 10 steps of 48 samples (a constant learning rate: --epochs sets a schedule's length).
  const std::string base =
      "train --dataset synthetic --input_shape 32 --num_classes 5 --synthetic_train_size 480 --synthetic_test_size 40 "
      "--model mlp --width 32 --optimizer adamw --lr 0.01 --clip_max_norm 0.5 --lr_schedule constant --num_workers 0 "
      "--threads 1 --no-use_amp --log_every 5 --ema_decay 0.8 ";  // the export writes the average: resharded too
  auto full = test::run_gputrain(base + "--batch_size 48 --epochs 3 --output_dir " + (dir / "full") + " --export " +
                                 (dir / "full.st"));
  INFO(full.out << full.err);
  REQUIRE(full.exit_code == 0);

  const std::string run = dir / "run";
  auto first = test::run_gputrain(launch(2) + base + "--batch_size 24 --epochs 1 --shard optimizer --output_dir " + run);
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  // Rank 0's checkpoint holds the groups and an index; each rank's slices are in its own file.
  const CheckpointData saved = read_checkpoint_file(run + "/checkpoints/last.pt");
  CHECK(saved.optimizer.state.empty());
  REQUIRE_FALSE(saved.optimizer.shards.empty());
  auto folders = shard_folders(run);
  REQUIRE(folders.size() == 1);
  CHECK(fs::exists(folders[0] / "rank-0-of-2.safetensors"));
  CHECK(fs::exists(folders[0] / "rank-1-of-2.safetensors"));

  // 3 ranks, --shard gradients: the slices are cut anew (the global batch of 48 is kept).
  auto second = test::run_gputrain(launch(3) + base + "--epochs 2 --shard gradients --resume auto --output_dir " + run);
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  // Rank 0 of 3 wants the first third of the slices: inside old rank 0's half, one file.
  CHECK_THAT(second.out, Catch::Contains("rank 0 read 1 of the 2 shard files"));
  folders = shard_folders(run);
  REQUIRE(folders.size() == 1);  // the 2-rank save's files went with the checkpoint they belonged to
  CHECK(fs::exists(folders[0] / "rank-2-of-3.safetensors"));

  // One file, then one process without sharding: the uninterrupted run's weights.
  auto whole = test::run_gputrain("consolidate " + run + "/checkpoints/last.pt " + (dir / "whole.pt"));
  INFO(whole.out << whole.err);
  REQUIRE(whole.exit_code == 0);
  const CheckpointData consolidated = read_checkpoint_file(dir / "whole.pt");
  CHECK(consolidated.optimizer.shards.empty());
  CHECK(consolidated.optimizer.state.size() == 6);  // three layers' weights and biases
  auto third = test::run_gputrain(base + "--epochs 3 --resume " + (dir / "whole.pt") + " --output_dir " + (dir / "third") +
                                  " --export " + (dir / "third.st"));
  INFO(third.out << third.err);
  REQUIRE(third.exit_code == 0);
  check_same_weights(dir / "full.st", dir / "third.st");
  // The sharded checkpoint itself resumes in one process too (its shards consolidated on load).
  auto direct = test::run_gputrain(base + "--epochs 3 --resume " + run + "/checkpoints/last.pt --output_dir " +
                                   (dir / "direct") + " --export " + (dir / "direct.st"));
  INFO(direct.out << direct.err);
  REQUIRE(direct.exit_code == 0);
  CHECK_THAT(direct.out, Catch::Contains("rank 0 read 3 of the 3 shard files"));
  check_same_weights(dir / "full.st", dir / "direct.st");
}

TEST_CASE("sharded data parallel: missing or foreign shard files exit 2 naming the file, and a crash in a save keeps the "
          "previous checkpoint",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string base = launch(2) + kMlp + "--batch_size 24 --shard optimizer ";
  const std::string a = dir / "a", b = dir / "b";
  for (const auto& run : {a, b}) {
    auto r = test::run_gputrain(base + "--epochs 1 --output_dir " + run);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  const fs::path file = shard_folders(a).at(0) / "rank-1-of-2.safetensors";
  fs::rename(file, dir / "kept.safetensors");
  auto missing = test::run_gputrain(base + "--epochs 2 --resume auto --output_dir " + a);
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains(file.string()));
  // Rank 0 reads its own file alone: it hears rank 1's refusal before it says it resumed, and
  // says the same line.
  CHECK_THAT(missing.err, Catch::Contains("[rank0] gputrain: error: ") && Catch::Contains("[rank1] gputrain: error: "));
  CHECK_THAT(missing.out, !Catch::Contains("resumed from"));
  // Another run's file in its place.
  fs::copy_file(shard_folders(b).at(0) / "rank-1-of-2.safetensors", file);
  auto foreign = test::run_gputrain(base + "--epochs 2 --resume auto --output_dir " + a);
  CHECK(foreign.exit_code == 2);
  CHECK_THAT(foreign.err, Catch::Contains(file.string()) && Catch::Contains("belongs to another save"));
  fs::remove(file);
  fs::rename(dir / "kept.safetensors", file);

  // Killed inside the next save (after the shard files, before the checkpoint's rename): the
  // previous checkpoint and its shards still resume, and the crashed save's files are reclaimed.
  const size_t before = shard_folders(a, "").size();
  CHECK(before == checkpoints_in(a));
  auto killed = test::run_gputrain(base + "--epochs 2 --resume auto --output_dir " + a, "GPUTRAIN_FAULT_KILL_IN_SAVE=1");
  CHECK(killed.exit_code != 0);
  CHECK(shard_folders(a, "").size() == before + 1);  // the torn save's
  auto resumed = test::run_gputrain(base + "--epochs 2 --resume auto --output_dir " + a + " --export " + (dir / "a.st"));
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(shard_folders(a, "").size() == checkpoints_in(a));  // one per checkpoint: the torn save's went
  auto straight = test::run_gputrain(base + "--epochs 2 --output_dir " + (dir / "c") + " --export " + (dir / "c.st"));
  REQUIRE(straight.exit_code == 0);
  check_same_weights(dir / "c.st", dir / "a.st");
}

// A stop signal reaches every rank (the launcher forwards it); they agree to stop at one step and
// save: the sharded save's own store meetings must not take that signal for a failed peer.
TEST_CASE("sharded data parallel: SIGTERM stops every rank at one step with a sharded checkpoint that resumes exactly",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string base = launch(2) + kMlp + "--batch_size 24 --epochs 2 --shard gradients ";
  const std::string run = dir / "run";
  auto stopped = test::run_gputrain(base + "--output_dir " + run, "GPUTRAIN_FAULT_SIGTERM_STEP=25");
  INFO(stopped.out << stopped.err);
  CHECK(stopped.exit_code == 143);
  CHECK_THAT(stopped.out, Catch::Contains("stopped (SIGTERM) at step 25; checkpoint " + run + "/checkpoints/last.pt"));
  CHECK(read_checkpoint_file(run + "/checkpoints/last.pt").meta.step == 25);
  auto resumed = test::run_gputrain(base + "--resume auto --output_dir " + run + " --export " + (dir / "run.st"));
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  auto straight = test::run_gputrain(base + "--output_dir " + (dir / "straight") + " --export " + (dir / "straight.st"));
  REQUIRE(straight.exit_code == 0);
  check_same_weights(dir / "straight.st", dir / "run.st");
}

TEST_CASE("sharded data parallel: torchrun restarts after a rank dies and inside a save resume the sharded checkpoint "
          "and train the weights of an uninterrupted run",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string torchrun = std::string(GPUTRAIN_SOURCE_DIR) + "/.venv/bin/torchrun";
  REQUIRE(fs::exists(torchrun));  // tools/setup.sh makes the .venv
  // 3 epochs of 20 steps; sharded checkpoints at each epoch's end (rank 0 keeps no step of its
  // own when a rank dies: the slices of the others are out of its reach).
  const std::string job = kMlp + "--epochs 3 --dist_timeout 60 ";
  auto one = test::run_gputrain(job + "--batch_size 48 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  REQUIRE(one.exit_code == 0);
  // Rank 1 dies at step 25, after the checkpoint of step 20; then rank 0 dies inside its first
  // save (step 40): both restarts resume step 20.
  const std::string run = dir / "run", wrapper = dir / "rank.sh";
  test::write_file(wrapper, std::string("#!/bin/sh\ncase \"$TORCHELASTIC_RESTART_COUNT:$RANK\" in\n"
                                        "  0:1) export GPUTRAIN_FAULT_KILL_STEP=25 ;;\n"
                                        "  1:0) export GPUTRAIN_FAULT_KILL_IN_SAVE=1 ;;\n"
                                        "esac\nexec ") + test::gputrain_exe() + " " + job +
                                "--batch_size 24 --shard optimizer --output_dir " + run + " --export " + run + ".st\n");
  fs::permissions(wrapper, fs::perms::owner_all);
  const std::string cmd = fmt::format("{} --nnodes 1 --nproc_per_node 2 --max_restarts 2 --master_addr 127.0.0.1 "
                                      "--master_port {} --no-python {} >{} 2>&1",
                                      torchrun, free_port(), wrapper, dir / "run.out");
  const int status = std::system(cmd.c_str());
  INFO(test::read_file(dir / "run.out"));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  check_same_weights(dir / "one.st", run + ".st");
  std::vector<int64_t> resumed;
  for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
    if (r["event"] == "resume") resumed.push_back(r["step"].get<int64_t>());
  CHECK(resumed == std::vector<int64_t>{20, 20});
  CHECK(shard_folders(run, "").size() == checkpoints_in(run));
}

TEST_CASE("sharded data parallel: refused with pipeline stages and --unfreeze_at_epoch, and one process shards nothing",
          "[dist][cli]") {
  auto stages = test::run_gputrain(launch(2) + kMlp + "--batch_size 24 --shard optimizer --pipeline_stages 2");
  CHECK(stages.exit_code == 2);
  CHECK_THAT(stages.err, Catch::Contains("--shard optimizer with --pipeline_stages 2: not yet"));
  auto alone = test::run_gputrain(kMlp + "--batch_size 24 --shard gradients --max_steps 1");
  CHECK(alone.exit_code == 0);
  CHECK_THAT(alone.out, Catch::Contains("one process: nothing to shard its state over"));
}

TEST_CASE("sharded data parallel: --shard gradients splits a batch that runs out of memory, and reduces its chunks once",
          "[dist][cli]") {
  test::TempDir dir;
  // A simulated limit of 12 samples: rank 0's batch of 24 runs out of memory at step 1 and goes
  // on in chunks of 12, rank 1's batch of 12 fits. Rank 0's chunks accumulate and the step
  // reduces once, as rank 1's does (a reduce per chunk would meet rank 1 with one collective
  // too many), so the weights are those of unsharded data parallel split alike.
  const std::string base = launch(2) + kMlp + "--batch_size 24 --rank_batch_sizes 24,12 --epochs 1 ";
  const std::string oom = "GPUTRAIN_FAULT_OOM_ABOVE=12";
  auto none = test::run_gputrain(base + "--output_dir " + (dir / "none") + " --export " + (dir / "none.st"), oom);
  INFO(none.out << none.err);
  REQUIRE(none.exit_code == 0);
  auto sharded = test::run_gputrain(base + "--shard gradients --output_dir " + (dir / "grad") + " --export " +
                                        (dir / "grad.st"),
                                    oom);
  INFO(sharded.out << sharded.err);
  REQUIRE(sharded.exit_code == 0);
  CHECK_THAT(sharded.err, Catch::Contains("[rank0] gputrain: out of memory at step 1: micro-batch 24 -> 12") &&
                              !Catch::Contains("[rank1] gputrain: out of memory"));
  check_same_weights(dir / "none.st", dir / "grad.st");
  // In a step's second loader batch the first one's gradients reached the other ranks already:
  // no retry, one clear line.
  auto late = test::run_gputrain(launch(2) + kMlp + "--batch_size 12 --accumulation_steps 2 --shard gradients --max_steps 2 "
                                     "--output_dir " + (dir / "late"),
                                 "GPUTRAIN_FAULT_OOM_STEP=2 GPUTRAIN_FAULT_OOM_FORWARD=2");
  CHECK(late.exit_code == 1);
  CHECK_THAT(late.err, Catch::Contains("out of memory in step 2 while its gradients were being summed over the ranks"));
}
