// The rank environment as torchrun, `gputrain launch` and Slurm set it, and the launcher's
// fail-fast with real processes.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>

#include "core/error.h"
#include "parallel/launcher.h"
#include "parallel/rank_env.h"
#include "parallel/balance.h"
#include "test_util.h"

using namespace gputrain;

namespace {

RankEnv from(const std::map<std::string, std::string>& vars) {
  return read_rank_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

}  // namespace

TEST_CASE("rank env: nothing set is one process", "[dist]") {
  RankEnv e = from({});
  CHECK(e.source.empty());
  CHECK(e.rank == 0);
  CHECK(e.world_size == 1);
  CHECK(e.describe() == "one process");
}

TEST_CASE("rank env: torchrun's variables", "[dist]") {
  RankEnv e = from({{"RANK", "3"},
                    {"LOCAL_RANK", "1"},
                    {"WORLD_SIZE", "4"},
                    {"LOCAL_WORLD_SIZE", "2"},
                    {"GROUP_RANK", "1"},
                    {"MASTER_ADDR", "10.0.0.5"},
                    {"MASTER_PORT", "29400"},
                    {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  CHECK(e.source == "torchrun");
  CHECK(e.rank == 3);
  CHECK(e.local_rank == 1);
  CHECK(e.world_size == 4);
  CHECK(e.local_world_size == 2);
  CHECK(e.node_rank == 1);
  CHECK(e.master_addr == "10.0.0.5");
  CHECK(e.master_port == 29400);
  CHECK(e.agent_store);
  CHECK(e.describe() == "rank 3 of 4 (local 1 of 2, node 1) from torchrun, rendezvous 10.0.0.5:29400 (torchrun's store)");
}

TEST_CASE("rank env: Slurm's variables, compressed forms included", "[dist]") {
  RankEnv e = from({{"SLURM_PROCID", "5"},
                    {"SLURM_LOCALID", "0"},
                    {"SLURM_NODEID", "2"},
                    {"SLURM_NTASKS", "7"},
                    {"SLURM_TASKS_PER_NODE", "2(x3),1"},
                    {"SLURM_JOB_NODELIST", "gpu[07-09,12],login"},
                    {"SLURM_JOB_ID", "123456"},
                    {"SLURM_STEP_ID", "0"},
                    {"SLURM_RESTART_COUNT", "2"}});
  CHECK(e.source == "slurm");
  CHECK(e.restart_count == 2);  // a requeued job: it continues its run
  CHECK(e.rank == 5);
  CHECK(e.world_size == 7);
  CHECK(e.local_world_size == 2);
  CHECK(e.node_rank == 2);
  CHECK(e.master_addr == "gpu07");
  CHECK(e.master_port == 15000 + 123456 % 20000);
  // MASTER_PORT and MASTER_ADDR win over what is derived; torchrun's variables over Slurm's.
  RankEnv p = from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "9"},
                    {"MASTER_PORT", "4000"}});
  CHECK(p.master_port == 4000);
  RankEnv t = from({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}});
  CHECK(t.source == "torchrun");
  CHECK(t.rank == 0);
}

TEST_CASE("rank env: Slurm host lists and task counts", "[dist]") {
  using V = std::vector<std::string>;
  CHECK(expand_hostlist("n[01-04,07]") == V{"n01", "n02", "n03", "n04", "n07"});
  CHECK(expand_hostlist("a,b[9-11]x,c") == V{"a", "b9x", "b10x", "b11x", "c"});
  CHECK(expand_hostlist("node5") == V{"node5"});
  CHECK_THROWS_AS(expand_hostlist("n[1-"), std::invalid_argument);
  CHECK_THROWS_AS(expand_hostlist("n[4-2]"), std::invalid_argument);
  CHECK_THROWS_AS(expand_hostlist("a,,b"), std::invalid_argument);
  CHECK(expand_tasks_per_node("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(expand_tasks_per_node("4") == std::vector<int>{4});
  CHECK_THROWS_AS(expand_tasks_per_node("2(x"), std::invalid_argument);
  CHECK_THROWS_AS(expand_tasks_per_node("0"), std::invalid_argument);
}

TEST_CASE("rank env: malformed or inconsistent values are usage errors naming the variable", "[dist]") {
  auto message = [](const std::map<std::string, std::string>& vars) {
    try {
      from(vars);
    } catch (const Error& e) {
      CHECK(e.exit_code == kExitUsage);
      return e.problems.at(0);
    }
    return std::string("no error");
  };
  CHECK_THAT(message({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), Catch::Contains("RANK=x is not an integer"));
  CHECK_THAT(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), Catch::Contains("rank 2 outside world size 2"));
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), Catch::Contains("world size 0"));
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}), Catch::Contains("master port 70000"));
  CHECK_THAT(message({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n[1-"}}),
             Catch::Contains("SLURM_JOB_NODELIST=n[1- cannot be read"));
  CHECK_THAT(message({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_TASKS_PER_NODE", "2(x"}}),
             Catch::Contains("SLURM_TASKS_PER_NODE=2(x cannot be read"));
  // The batch script of `sbatch --ntasks 4` itself, not a task srun started: caught at once.
  CHECK_THAT(message({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "7"}}),
             Catch::Contains("SLURM_NTASKS=4 but this process was not started by srun (no SLURM_STEP_ID)"));
  CHECK(from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).world_size == 1);  // one task needs no srun
  // A PyTorchJob pod with 2 processes per pod, gputrain started without torchrun or launch.
  CHECK_THAT(message({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"PET_NPROC_PER_NODE", "2"}}),
             Catch::Contains("this is pod 1 of a PyTorchJob with PET_NPROC_PER_NODE=2"));
  CHECK(from({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"PET_NPROC_PER_NODE", "2"}}).rank == 3);
  CHECK(from({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TORCHELASTIC_RESTART_COUNT", "1"}}).restart_count == 1);
}

TEST_CASE("launch: the ranks get torchrun's environment and their output is prefixed", "[dist][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain("launch --nproc_per_node 2 -- presets");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[rank0] ") && Catch::Contains("[rank1] ") && Catch::Contains("smoke"));
  CHECK_THAT(r.err, Catch::Contains("gputrain launch: 2 ranks on this node (2 in all), rendezvous 127.0.0.1:"));

  auto bad = test::run_gputrain("launch --nproc_per_node 2 -- presets show no_such_preset");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("exited with code 2; stopping the other ranks"));

  CHECK(test::run_gputrain("launch --nproc_per_node 0 -- presets").exit_code == 2);
  CHECK(test::run_gputrain("launch --nproc_per_node 2").exit_code == 2);
  CHECK(test::run_gputrain("launch --nnodes 2 -- presets").exit_code == 2);
  auto typo = test::run_gputrain("launch --nproc_per_nod 2 -- presets");
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Catch::Contains("did you mean"));
}

TEST_CASE("launch: one failing rank stops the others, and nothing is left running", "[dist]") {
  test::TempDir dir;
  const std::string marker = dir / "alive";
  LaunchOptions o;
  o.nproc_per_node = 3;
  o.exe = "/bin/sh";
  // Rank 1 fails after a moment; the others would run for a minute, their children too.
  o.command = {"-c", "if [ \"$RANK\" = 1 ]; then sleep 1; exit 7; fi; (sleep 60; touch " + marker + ") & sleep 60"};
  o.grace_seconds = 5;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(launch(o) == 7);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 20);
  // The ranks' own children died with their process groups: nobody touches the marker.
  CHECK(std::system(("pgrep -f '[t]ouch " + marker + "' >/dev/null").c_str()) != 0);
}

TEST_CASE("launch: SIGTERM to the launcher reaches every rank, and it exits 143", "[dist]") {
  test::TempDir dir;
  const pid_t pid = fork();
  if (pid == 0) {
    LaunchOptions o;
    o.nproc_per_node = 2;
    o.exe = "/bin/sh";
    o.command = {"-c", "trap 'echo got-term-$RANK >> " + (dir / "log") + "; exit 143' TERM; sleep 60 & wait"};
    _exit(launch(o));
  }
  sleep(2);
  CHECK(test::sigterm_and_wait(pid) == 143);
  const std::string log = test::read_file(dir / "log");
  CHECK_THAT(log, Catch::Contains("got-term-0") && Catch::Contains("got-term-1"));
}

TEST_CASE("balance: the global batch split by speed, within each rank's memory", "[dist]") {
  using V = std::vector<int64_t>;
  CHECK(split_by_speed({1, 1}, {0, 0}, 64) == V{32, 32});
  CHECK(split_by_speed({1, 2}, {0, 0}, 64) == V{43, 21});  // twice as fast, twice the batch
  CHECK(split_by_speed({1, 2}, {30, 0}, 64) == V{30, 34});  // the fast rank holds only 30
  CHECK(split_by_speed({1, 1, 1}, {10, 0, 0}, 90) == V{10, 40, 40});
  CHECK(split_by_speed({1, 1}, {40.7, 24.2}, 64) == V{40, 24});  // exactly full
  CHECK(split_by_speed({1, 1}, {10, 10}, 64) == V{32, 32});  // cannot fit: by speed, the OOM backoff splits
  CHECK(split_by_speed({1, 100}, {0, 0}, 8) == V{7, 1});    // every rank keeps at least one sample
}
