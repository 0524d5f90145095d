// Jobs across nodes and restarts, with real processes: two `gputrain launch` nodes on one machine,
// ranks that disagree (flags, world sizes), a rank 0 that cannot start, and torchrun restarts.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "parallel/launcher.h"
#include "train/checkpoint_file.h"
#include "test_util.h"
#include "test_weights.h"

using namespace gputrain;

namespace {

// An MLP without BatchNorm or dropout on synthetic data, 20 steps, one thread per process.
const std::string kMlp =
    "train --dataset synthetic --input_shape 32 --num_classes 5 --synthetic_train_size 1280 --synthetic_test_size 67 "
    "--model mlp --width 32 --optimizer adamw --lr 0.01 --clip_max_norm 1 --max_steps 20 --epochs 1 --num_workers 0 "
    "--threads 1 --no-use_amp --log_every 5 ";

struct Nodes {
  int code[2];
  std::string out[2];
  double seconds;
};

// Runs two shell command lines at once (two nodes, two pods), each with its output and exit
// code, and waits for both.
Nodes run_pair(const test::TempDir& dir, const std::string& line0, const std::string& line1) {
  std::string script;
  const std::string lines[2] = {line0, line1};
  for (int n = 0; n < 2; ++n)
    script += fmt::format("({} >{} 2>&1; echo $? >{}) & ", lines[n], dir / ("node" + std::to_string(n)),
                          dir / ("code" + std::to_string(n)));
  const auto t0 = std::chrono::steady_clock::now();
  std::system((script + "wait").c_str());
  Nodes r{};
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int n = 0; n < 2; ++n) {
    r.out[n] = test::read_file(dir / ("node" + std::to_string(n)));
    const std::string code = test::read_file(dir / ("code" + std::to_string(n)));
    r.code[n] = code.empty() ? -1 : std::stoi(code);  // -1: the line never finished
  }
  return r;
}

// Two `gputrain launch` nodes of `nproc[i]` ranks each, both on this machine, each with its own
// ranks' command.
Nodes two_nodes(const test::TempDir& dir, const std::string& command0, const std::string& command1,
                int nproc0 = 1, int nproc1 = 1) {
  const int port = free_port();
  auto node = [&](int n, int nproc, const std::string& command) {
    return fmt::format("{} launch --nnodes 2 --node_rank {} --nproc_per_node {} --master_addr 127.0.0.1 --master_port {} -- {}",
                       test::gputrain_exe(), n, nproc, port, command);
  };
  return run_pair(dir, node(0, nproc0, command0), node(1, nproc1, command1));
}

// `gputrain launch` of 2 ranks training a long smoke run into dir/run, output in dir/out; returns
// the launcher's pid once training has begun (the first epoch's checkpoint is there: no step
// need be logged by then).
pid_t start_long_job(const test::TempDir& dir, const std::string& flags) {
  const std::string run = dir / "run";
  const pid_t pid = test::start_shell(fmt::format(
      "exec {} launch --nproc_per_node 2 -- train --preset smoke --epochs 2000 --num_workers 0 {} --output_dir {} >{} 2>&1",
      test::gputrain_exe(), flags, run, dir / "out"));
  for (int i = 0; i < 600 && !std::filesystem::exists(run + "/checkpoints/epoch-1.pt"); ++i) ::usleep(100000);
  return pid;
}

}  // namespace

TEST_CASE("cluster: two nodes on one machine (launch --nnodes 2 at 127.0.0.1) train the weights of one process",
          "[dist][cli]") {
  test::TempDir dir;
  auto one = test::run_gputrain(kMlp + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  REQUIRE(one.exit_code == 0);
  // The second node's rank may set its own loader threads and output folder (rank 0's is the run's).
  auto nodes = two_nodes(dir, kMlp + "--batch_size 32 --output_dir " + (dir / "two") + " --export " + (dir / "two.st"),
                         kMlp + "--batch_size 32 --output_dir " + (dir / "elsewhere") + " --num_workers 1");
  INFO(nodes.out[0] << nodes.out[1]);
  REQUIRE(nodes.code[0] == 0);
  REQUIRE(nodes.code[1] == 0);
  test::check_same_weights(dir / "one.st", dir / "two.st");
  CHECK_THAT(nodes.out[0], Catch::Contains("data parallel         2 ranks over Gloo"));
  CHECK_FALSE(std::filesystem::exists(dir / "elsewhere"));
}

TEST_CASE("cluster: ranks with another --lr, --batch_size or --width are refused at the start, on every rank",
          "[dist][cli]") {
  test::TempDir dir;
  auto nodes = two_nodes(dir, kMlp + "--batch_size 32 --output_dir " + (dir / "run"),
                         kMlp + "--batch_size 16 --output_dir " + (dir / "run") + " --lr 0.02 --width 16");
  INFO(nodes.out[0] << nodes.out[1]);
  const std::string line =
      "the ranks run different jobs: --batch_size is 32 on rank 0, 16 on rank 1; --lr is 0.01 on rank 0, 0.02 on rank 1; "
      "--width is 32 on rank 0, 16 on rank 1";
  for (int n = 0; n < 2; ++n) {
    CHECK(nodes.code[n] == 2);
    CHECK_THAT(nodes.out[n], Catch::Contains(fmt::format("[rank{}] gputrain: error: {}", n, line)) &&
                                 Catch::Contains("each rank may have its own device") && !Catch::Contains("step 5"));
  }
  CHECK_FALSE(std::filesystem::exists(dir / "run/checkpoints"));
}

TEST_CASE("cluster: nodes told different world sizes are refused at the rendezvous, naming both", "[dist][cli]") {
  test::TempDir dir;
  // Node 0 starts 2 ranks (a world of 4), node 1 one rank (a world of 2).
  const std::string cmd = kMlp + "--batch_size 16 --dist_timeout 60 --output_dir " + (dir / "run");
  auto nodes = two_nodes(dir, cmd, cmd, 2, 1);
  INFO(nodes.out[0] << nodes.out[1]);
  for (int n = 0; n < 2; ++n) {
    CHECK(nodes.code[n] == 2);
    CHECK_THAT(nodes.out[n], Catch::Contains("the ranks disagree on the world size: rank ") &&
                                 Catch::Contains(" was started with ") && !Catch::Contains("frame #"));
  }
  CHECK_THAT(nodes.out[0] + nodes.out[1], Catch::Contains("with 4") && Catch::Contains("with 2"));
  CHECK(nodes.seconds < 30);  // not the 60 s timeout
}

TEST_CASE("cluster: two processes started as rank 0 are both refused at once, naming the rank", "[dist][cli]") {
  test::TempDir dir;
  const std::string env = fmt::format("env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "
                                      "MASTER_PORT={} {} ",
                                      free_port(), test::gputrain_exe());
  // The second comes when the first serves the job's store: it cannot serve it too.
  auto r = run_pair(dir, env + kMlp + "--dist_timeout 60 --output_dir " + (dir / "a"),
                    "sleep 2; " + env + kMlp + "--dist_timeout 60 --output_dir " + (dir / "b"));
  INFO(r.out[0] << r.out[1]);
  for (int n = 0; n < 2; ++n) {
    CHECK(r.code[n] == 2);
    CHECK_THAT(r.out[n], Catch::Contains("gputrain: error: two processes were started as rank 0 of 2") &&
                             !Catch::Contains("frame #"));
  }
  CHECK(r.seconds < 30);  // not the 60 s timeout
}

TEST_CASE("cluster: a rank killed mid-run is named at once as exited or killed, with its step, not as late",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string env = fmt::format("env LOCAL_WORLD_SIZE=2 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={} ",
                                      free_port());
  const std::string job = std::string(test::gputrain_exe()) +
                          " train --preset smoke --epochs 2000 --num_workers 0 --dist_timeout 60 --output_dir " + (dir / "run");
  auto r = run_pair(dir, env + "RANK=0 LOCAL_RANK=0 " + job, env + "RANK=1 LOCAL_RANK=1 GPUTRAIN_FAULT_KILL_STEP=10 " + job);
  INFO(r.out[0] << r.out[1]);
  CHECK(r.code[1] == 128 + 9);
  CHECK(r.code[0] == 1);
  CHECK_THAT(r.out[0], Catch::Contains("rank 0 of 2: rank 1 exited or was killed at step 1") &&
                           Catch::Contains("failed when its connection closed (noticed at 20") &&
                           !Catch::Contains("did not come within"));
  CHECK(r.seconds < 40);  // not the 60 s timeout
}

TEST_CASE("cluster: when rank 0 cannot start (its folder is locked), every rank says why in one line and exits 2",
          "[dist][cli]") {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "run");
  const std::string lock = dir / "run/.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);  // another run holds the folder
  auto r = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--batch_size 32 --output_dir " + (dir / "run"));
  ::close(fd);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  const std::string all = r.out + r.err;
  for (int rank = 0; rank < 2; ++rank)
    CHECK_THAT(all, Catch::Contains(fmt::format("[rank{}] gputrain: error: output_dir '{}' is in use by another gputrain run",
                                                rank, dir / "run")));
  CHECK_THAT(all, !Catch::Contains("frame #") && !Catch::Contains("terminate called"));
}

TEST_CASE("launch: the ranks' command without '--' is one line that says so", "[dist][cli]") {
  auto r = test::run_gputrain("launch --nproc_per_node 2 train --preset smoke --epochs 1 --batch_size 8");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: launch needs '--' before the ranks' command\n") &&
                        Catch::Contains("hint: gputrain launch --nproc_per_node 2 -- train"));
  auto port = test::run_gputrain("launch --nnodes 2 --node_rank 1 --master_addr 127.0.0.1 -- train --preset smoke");
  CHECK(port.exit_code == 2);
  CHECK_THAT(port.err, Catch::Contains("launch over 2 nodes needs --master_port"));
}

TEST_CASE("cluster: torchrun restarts at the worst moments (before the first checkpoint, after one, then mid-save with "
          "a slow rank) train the weights of an uninterrupted run, under both rendezvous backends",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string torchrun = std::string(GPUTRAIN_SOURCE_DIR) + "/.venv/bin/torchrun";
  REQUIRE(std::filesystem::exists(torchrun));  // tools/setup.sh makes the .venv
  // 3 epochs of 20 steps at a global batch of 64; checkpoints at each epoch's end.
  const std::string job =
      "train --dataset synthetic --input_shape 32 --num_classes 5 --synthetic_train_size 1280 --synthetic_test_size 67 "
      "--model mlp --width 32 --optimizer adamw --lr 0.01 --clip_max_norm 1 --epochs 3 --num_workers 0 --threads 1 "
      "--no-use_amp --log_every 5 --dist_timeout 60 ";
  auto one = test::run_gputrain(job + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  REQUIRE(one.exit_code == 0);
  struct Scenario {
    std::string name;
    int max_restarts;
    std::string faults;            // the wrapper's cases on "$TORCHELASTIC_RESTART_COUNT:$RANK"
    // What each restart may resume from: the last step every rank completed, which rank 0 keeps
    // when it sees the collective fail, or the last checkpoint when torchrun stopped it first.
    std::vector<std::vector<int64_t>> resumes;
  };
  const std::vector<Scenario> scenarios = {
      // Rank 1 dies at step 5, before the first checkpoint: rank 0 keeps step 5 (or 4), or
      // the restart starts afresh.
      {"early", 1, "  0:1) export GPUTRAIN_FAULT_KILL_STEP=5 ;;\n", {{4, 5}}},
      // Rank 1 dies at step 25, after the checkpoint of step 20. Then rank 1 starts 3 s late,
      // and rank 0 dies inside its first save (step 40): the restart resumes where the first did.
      {"late", 2,
       "  0:1) export GPUTRAIN_FAULT_KILL_STEP=25 ;;\n"
       "  1:0) export GPUTRAIN_FAULT_KILL_IN_SAVE=1 ;;\n"
       "  1:1) sleep 3 ;;\n",
       {{20, 24, 25}, {20, 24, 25}}},
  };
  for (const auto& scenario : scenarios)
    for (const std::string backend : {"static", "c10d"}) {
      INFO(scenario.name << ", rendezvous " << backend);
      const std::string name = scenario.name + "-" + backend, run = dir / name, wrapper = dir / (name + ".sh");
      // No --resume auto: a restarted job continues its run by itself.
      test::write_file(wrapper, "#!/bin/sh\ncase \"$TORCHELASTIC_RESTART_COUNT:$RANK\" in\n" + scenario.faults +
                                    "esac\nexec " + test::gputrain_exe() + " " + job + "--batch_size 32 --output_dir " +
                                    run + " --export " + run + ".st\n");
      std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
      const int port = free_port();
      const std::string rendezvous =
          backend == "static" ? fmt::format("--master_addr 127.0.0.1 --master_port {}", port)
                              : fmt::format("--rdzv_backend c10d --rdzv_endpoint 127.0.0.1:{} --rdzv_id job", port);
      const std::string cmd = fmt::format("{} --nnodes 1 --nproc_per_node 2 --max_restarts {} {} --no-python {} >{} 2>&1",
                                          torchrun, scenario.max_restarts, rendezvous, wrapper, dir / (name + ".out"));
      const int status = std::system(cmd.c_str());
      INFO(test::read_file(dir / (name + ".out")));
      REQUIRE(WIFEXITED(status));
      REQUIRE(WEXITSTATUS(status) == 0);
      test::check_same_weights(dir / "one.st", run + ".st");
      std::vector<int64_t> resumed;
      for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
        if (r["event"] == "resume") resumed.push_back(r["step"].get<int64_t>());
      // (Before the first checkpoint, a restart with nothing kept starts afresh: no resume.)
      CHECK((resumed.size() == scenario.resumes.size() || (scenario.name == "early" && resumed.empty())));
      for (size_t i = 0; i < resumed.size() && i < scenario.resumes.size(); ++i) {
        INFO("resume " << i << " from step " << resumed[i]);
        const auto& may = scenario.resumes[i];
        CHECK(std::find(may.begin(), may.end(), resumed[i]) != may.end());
      }
      if (resumed.size() == 2) CHECK(resumed[1] == resumed[0]);  // the killed save changed nothing
    }
}

TEST_CASE("cluster: with --log_every 5000, SIGTERM stops 2 ranks within a step or two with a checkpoint, and the "
          "resume hint is a launch line",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  const pid_t pid = start_long_job(dir, "--log_every 5000");
  const auto t0 = std::chrono::steady_clock::now();
  const int code = test::sigterm_and_wait(pid);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string out = test::read_file(dir / "out");
  INFO(out);
  CHECK(code == 143);
  CHECK(took < 10);  // the launcher's grace is 15 s: the ranks stopped by themselves
  CHECK_THAT(out, !Catch::Contains("killing them"));
  int64_t stopped_at = -1;
  for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
    if (r["event"] == "stopped" && r["reason"] == "SIGTERM") stopped_at = r["step"].get<int64_t>();
  CHECK(stopped_at > 0);
  CHECK(stopped_at < 5000);
  CHECK_THAT(out, Catch::Contains("resume with: gputrain launch --nproc_per_node 2 -- train --output_dir " + run +
                                  " --resume auto"));
}

TEST_CASE("cluster: --time_limit on 2 ranks with --log_every 5000 stops near the limit", "[dist][cli]") {
  test::TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = test::run_gputrain("launch --nproc_per_node 2 -- train --preset smoke --epochs 2000 --log_every 5000 "
                              "--num_workers 0 --time_limit 5 --output_dir " + (dir / "run"));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("stopped (time limit 5)"));
  CHECK(took < 12);  // 2000 epochs would take minutes; wide slack for a loaded 2-core machine
  CHECK(std::filesystem::exists(dir / "run/checkpoints/last.pt"));
}

TEST_CASE("cluster: a stopped rank is named with the collective and the step, rank 0 keeps the last step every rank "
          "completed, nothing is left running",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  // Rank 1 stops itself (SIGSTOP) after step 23, mid-epoch (8 steps each). Rank 0 goes into
  // step 24, whose forward moves BatchNorm's statistics before its gradient sum fails. No stop
  // check comes between: they come at multiples of an interval of at most --log_every 20 steps
  // (shorter when steps are slow), and 23 is a prime above 20, a multiple of 1 alone (steps of a
  // quarter second or more). (With step 21, a loaded host's 70 ms steps put a check at step 21.)
  const pid_t pid = test::start_shell(fmt::format(
      "GPUTRAIN_FAULT_STOP_STEP=23 GPUTRAIN_FAULT_STOP_RANK=1 exec {} launch --nproc_per_node 2 -- train --preset smoke "
      "--epochs 2000 --lr_schedule constant --log_every 20 --num_workers 0 --dist_timeout 5 --output_dir {} >{} 2>&1",
      test::gputrain_exe(), run, dir / "out"));
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  waitpid(pid, &status, 0);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string out = test::read_file(dir / "out");
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(took < 40);  // start-up, the 5 s timeout, the roll call, the stop: not the launcher's kill after its grace
  CHECK_THAT(out, Catch::Contains("[rank0] gputrain: error: rank 0 of 2: the all-reduce of step 24") &&
                      Catch::Contains(" failed: rank 1 did not come within --dist_timeout 5 s"));
  CHECK_THAT(out, Catch::Contains("rank 1 (pid ") && Catch::Contains(") is stopped") && !Catch::Contains("killing them"));
  CHECK(std::system(("pgrep -f '[o]utput_dir " + run + "' >/dev/null").c_str()) != 0);
  // Rank 0 kept step 23, which every rank completed, and the run continues from there.
  CHECK_THAT(out, Catch::Contains("[rank0] kept step 23 in " + run + "/checkpoints/last.pt"));
  // Exactly the state after step 23: rank 0's forward of step 24 (BatchNorm's statistics and
  // its count) is not in it. The same job stopped by --max_steps 23 holds the same tensors.
  auto ref = test::run_gputrain("launch --nproc_per_node 2 -- train --preset smoke --epochs 2000 --lr_schedule constant "
                                "--log_every 20 --num_workers 0 --max_steps 23 --output_dir " + (dir / "ref"));
  REQUIRE(ref.exit_code == 0);
  const auto kept = read_checkpoint_file(run + "/checkpoints/last.pt").model;
  const auto whole = read_checkpoint_file(dir / "ref/checkpoints/last.pt").model;
  REQUIRE(kept.size() == whole.size());
  bool has_bn_count = false;
  for (size_t i = 0; i < kept.size(); ++i) {
    INFO(kept[i].first);
    CHECK(kept[i].first == whole[i].first);
    CHECK(torch::equal(kept[i].second, whole[i].second));
    has_bn_count |= kept[i].first.ends_with("num_batches_tracked");
  }
  CHECK(has_bn_count);
  auto resumed = test::run_gputrain("train --resume auto --epochs 3 --num_workers 0 --output_dir " + run);
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("epoch 3, batch 7, step 23"));
}

TEST_CASE("cluster: a global batch larger than the training set is named as the global batch", "[dist][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain("launch --nproc_per_node 2 -- train --preset smoke --epochs 1 --batch_size 300 --num_workers 0 "
                              "--output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out + r.err, Catch::Contains("error: the global batch 600 (2 ranks, --batch_size 300 on this one) x "
                                            "accumulation_steps 1 is more than the 512 training samples"));
}

TEST_CASE("cluster: a Kubeflow PyTorchJob of 2 pods x 2 processes (PET_*, `gputrain launch` with no flags) trains the "
          "weights of one process",
          "[dist][cli]") {
  test::TempDir dir;
  auto one = test::run_gputrain(kMlp + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  REQUIRE(one.exit_code == 0);
  // What the operator sets in each pod: RANK and WORLD_SIZE count pods; PET_* are torchrun's.
  const int port = free_port();
  auto pod = [&](int n) {
    return fmt::format("MASTER_ADDR=127.0.0.1 MASTER_PORT={} WORLD_SIZE=2 RANK={} PET_NNODES=2 PET_NODE_RANK={} "
                       "PET_NPROC_PER_NODE=2 {} launch -- {} --batch_size 16 --output_dir {} --export {}",
                       port, n, n, test::gputrain_exe(), kMlp, dir / "job", dir / "job.st");
  };
  auto pods = run_pair(dir, pod(0), pod(1));
  const std::string out = pods.out[0] + pods.out[1];
  INFO(out);
  CHECK(pods.code[0] == 0);
  CHECK(pods.code[1] == 0);
  CHECK_THAT(out, Catch::Contains("2 ranks on this node (4 in all), rendezvous 127.0.0.1:" + std::to_string(port)));
  test::check_same_weights(dir / "one.st", dir / "job.st");
}

TEST_CASE("cluster: GLOO_SOCKET_IFNAME picks the interface, and one that does not exist is refused naming it", "[dist][cli]") {
  test::TempDir dir;
  auto lo = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--batch_size 32 --max_steps 3 --output_dir " +
                               (dir / "lo"), "GLOO_SOCKET_IFNAME=lo");
  INFO(lo.out << lo.err);
  CHECK(lo.exit_code == 0);
  auto bad = test::run_gputrain("launch --nproc_per_node 2 -- " + kMlp + "--batch_size 32 --output_dir " + (dir / "bad"),
                                "GLOO_SOCKET_IFNAME=nosuch0");
  INFO(bad.out << bad.err);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out + bad.err, Catch::Contains("GLOO_SOCKET_IFNAME=nosuch0: interface 'nosuch0' cannot be used") &&
                                    !Catch::Contains("frame #"));
}

TEST_CASE("cluster: a requeued Slurm job (SLURM_RESTART_COUNT) continues its run with the same command line",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string line = "train --preset smoke --num_workers 0 --output_dir " + (dir / "run");
  const std::string slurm = "SLURM_JOB_ID=42 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0 ";
  REQUIRE(test::run_gputrain(line + " --epochs 1", slurm).exit_code == 0);
  // The same line without the requeue count refuses the folder: it holds a run.
  CHECK(test::run_gputrain(line + " --epochs 2", slurm).exit_code == 2);
  auto requeued = test::run_gputrain(line + " --epochs 2", slurm + "SLURM_RESTART_COUNT=1");
  INFO(requeued.out << requeued.err);
  CHECK(requeued.exit_code == 0);
  CHECK_THAT(requeued.out, Catch::Contains("restart 1 of this job (SLURM_RESTART_COUNT): continuing with --resume auto") &&
                               Catch::Contains("resumed from"));
  // Another job's restart does not take over this run (a first start that was refused, say).
  auto other = test::run_gputrain(line + " --epochs 3", "SLURM_JOB_ID=43 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0 "
                                                        "SLURM_RESTART_COUNT=1");
  CHECK(other.exit_code == 2);
  CHECK_THAT(other.err, Catch::Contains("already holds a run"));
}

TEST_CASE("cluster: torchrun --nnodes 2 on one machine (c10d rendezvous) trains the weights of one process",
          "[dist][cli]") {
  test::TempDir dir;
  const std::string torchrun = std::string(GPUTRAIN_SOURCE_DIR) + "/.venv/bin/torchrun";
  REQUIRE(std::filesystem::exists(torchrun));  // tools/setup.sh makes the .venv
  auto one = test::run_gputrain(kMlp + "--batch_size 64 --output_dir " + (dir / "one") + " --export " + (dir / "one.st"));
  REQUIRE(one.exit_code == 0);
  const int port = free_port();
  const std::string node = fmt::format("{} --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:{} "
                                       "--rdzv_id two-nodes --no-python {} {} --batch_size 32 --output_dir {} --export {}",
                                       torchrun, port, test::gputrain_exe(), kMlp, dir / "job", dir / "job.st");
  auto nodes = run_pair(dir, node, node);
  INFO(nodes.out[0] + nodes.out[1]);
  CHECK(nodes.code[0] == 0);
  CHECK(nodes.code[1] == 0);
  test::check_same_weights(dir / "one.st", dir / "job.st");
}
