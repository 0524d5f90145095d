// The run folder: one owner (a second process is refused, naming the holder), refused runs change
// nothing, and --resume auto recovers from a crash at any point.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "monitor/metrics.h"
#include "monitor/sampler.h"
#include "test_util.h"

namespace fs = std::filesystem;
using gputrain::test::run_gputrain;

namespace {

// Every file below `dir` (name -> bytes): equal snapshots mean the folder did not change.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    files[fs::relative(e.path(), dir).string()] = e.is_regular_file() ? gputrain::test::read_file(e.path()) : "<dir>";
  return files;
}

const std::string kSmoke = "train --preset smoke --epochs 1 ";

// A small tmpfs at `dir`, for full-disk cases (needs root, as on the CI machine).
struct SmallDisk {
  std::string dir;
  bool mounted;
  SmallDisk(const std::string& at, const std::string& size) : dir(at) {
    fs::create_directories(dir);
    mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
  // Fills the disk with a file, leaving about `kib` KiB free.
  void fill_leaving(size_t kib) {
    const auto free = fs::space(dir).available;
    std::string bytes(free > kib * 1024 ? free - kib * 1024 : 0, '\0');
    gputrain::test::write_file(dir + "/filler", bytes);
  }
};

}  // namespace

TEST_CASE("run folder: a second run on a folder in use exits 2 naming the holder", "[run_folder]") {
  gputrain::test::TempDir dir;
  const std::string run = dir / "run";
  // A long run in the background; a second one starts once the first has logged a step.
  const std::string cmd = "sh -c '" + std::string(gputrain::test::gputrain_exe()) +
                          " train --preset smoke --epochs 200 --output_dir " + run + " >" + (dir / "first.log") +
                          " 2>&1 & pid=$!; for i in $(seq 600); do grep -qs event.:.step " + run +
                          "/metrics.jsonl && break; sleep 0.1; done; " + gputrain::test::gputrain_exe() +
                          " train --preset smoke --output_dir " + run + " --resume auto >" + (dir / "second.out") +
                          " 2>" + (dir / "second.err") + "; echo $? >" + (dir / "second.code") + "; echo $pid >" +
                          (dir / "first.pid") + "; kill -TERM $pid; wait $pid'";
  const int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 143);  // the first run, stopped by SIGTERM after the second tried
  const std::string err = gputrain::test::read_file(dir / "second.err");
  INFO(err);
  CHECK(std::stoi(gputrain::test::read_file(dir / "second.code")) == 2);
  std::string pid = gputrain::test::read_file(dir / "first.pid");
  pid.pop_back();
  CHECK_THAT(err,
             Catch::Contains("output_dir '" + run + "' is in use by another gputrain run (pid " + pid + " on host"));
  CHECK_THAT(err, Catch::Contains("hint:"));
  // The first run was not disturbed: it stopped on its signal with a checkpoint.
  CHECK(fs::exists(run + "/checkpoints/last.pt"));
}

TEST_CASE("run folder: refused runs leave the folder byte for byte as it was", "[run_folder]") {
  gputrain::test::TempDir dir;
  REQUIRE(run_gputrain(kSmoke + "--output_dir " + (dir / "a")).exit_code == 0);
  REQUIRE(run_gputrain(kSmoke + "--output_dir " + (dir / "b") + " --seed 7").exit_code == 0);
  fs::remove(dir / "a/.lock");  // as a folder from before there were locks
  const auto before = snapshot(dir / "a");

  // A new run into a folder that holds one.
  auto fresh = run_gputrain(kSmoke + "--output_dir " + (dir / "a"));
  CHECK(fresh.exit_code == 2);
  CHECK_THAT(fresh.err, Catch::Contains("already holds a run"));
  CHECK(snapshot(dir / "a") == before);

  // Another run's checkpoint continued in a folder that holds a run of its own.
  auto foreign = run_gputrain("train --resume " + (dir / "b/checkpoints/last.pt") + " --output_dir " + (dir / "a"));
  CHECK(foreign.exit_code == 2);
  CHECK_THAT(foreign.err, Catch::Contains("is another run's checkpoint") && Catch::Contains("new --output_dir"));
  CHECK(snapshot(dir / "a") == before);

  // A run refused after the folder was taken (a bad flag value found with the data) leaves no trace.
  auto bad = run_gputrain("train --preset smoke --output_dir " + (dir / "new") + " --monitor_metric mae");
  CHECK(bad.exit_code == 2);
  CHECK_FALSE(fs::exists(dir / "new"));

  // Branching into a new folder works, and config.json says where it came from.
  auto branch =
      run_gputrain("train --resume " + (dir / "b/checkpoints/last.pt") + " --epochs 2 --output_dir " + (dir / "c"));
  INFO(branch.out << branch.err);
  REQUIRE(branch.exit_code == 0);
  auto config = nlohmann::json::parse(gputrain::test::read_file(dir / "c/config.json"));
  CHECK(config["branched_from"] == dir / "b/checkpoints/last.pt");
}

TEST_CASE("run folder: --resume auto after a crash before the first checkpoint starts afresh, keeping the start",
          "[run_folder]") {
  gputrain::test::TempDir dir;
  // SIGKILL inside the very first save: config.json and metrics.jsonl, no checkpoint.
  auto killed = run_gputrain(kSmoke + "--output_dir " + (dir / "run"), "GPUTRAIN_FAULT_KILL_IN_SAVE=1");
  REQUIRE(killed.exit_code == 128 + 9);
  REQUIRE(fs::exists(dir / "run/metrics.jsonl"));
  auto again = run_gputrain(kSmoke + "--output_dir " + (dir / "run") + " --resume auto");
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("no checkpoint in") && Catch::Contains("moved the earlier start aside"));
  int aside = 0;
  for (const auto& e : fs::directory_iterator(dir / "run"))
    if (e.path().filename().string().rfind("aborted-", 0) == 0) {
      ++aside;
      CHECK(fs::exists(e.path() / "metrics.jsonl"));  // kept, not deleted
      CHECK(fs::exists(e.path() / "checkpoints/epoch-1.pt.tmp"));
    }
  CHECK(aside == 1);
  CHECK(fs::exists(dir / "run/checkpoints/last.pt"));
}

TEST_CASE("run folder: --resume auto with every checkpoint deleted starts the folder's own job again, not the default",
          "[run_folder]") {
  gputrain::test::TempDir dir;
  REQUIRE(run_gputrain("train --preset smoke --epochs 1 --width 4 --output_dir " + (dir / "run")).exit_code == 0);
  fs::remove_all(dir / "run/checkpoints");
  auto again = run_gputrain("train --output_dir " + (dir / "run") + " --resume auto");  // no preset, no flags
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("moved the earlier start aside") && Catch::Contains("starting its recorded job again"));
  const auto config = nlohmann::json::parse(gputrain::test::read_file(dir / "run/config.json"));
  CHECK(config["requested"]["preset"] == "smoke");  // not quickstart, the default
  CHECK(config["requested"]["width"] == 4);
  CHECK(config["requested"]["epochs"] == 1);
  CHECK(fs::exists(dir / "run/checkpoints/last.pt"));

  // Killed between config.json and metrics.jsonl: the record alone is the start of its job too.
  for (const char* name : {"metrics.jsonl", "status.json", "monitor.csv", "report.html", "checkpoints"})
    fs::remove_all(fs::path(dir / "run") / name);
  auto record_only = run_gputrain("train --output_dir " + (dir / "run") + " --resume auto");
  INFO(record_only.out << record_only.err);
  REQUIRE(record_only.exit_code == 0);
  CHECK_THAT(record_only.out, Catch::Contains("starting its recorded job again"));
  CHECK(nlohmann::json::parse(gputrain::test::read_file(dir / "run/config.json"))["requested"]["width"] == 4);
}

TEST_CASE("run folder: --resume auto passes over a damaged last.pt for the newest intact epoch checkpoint",
          "[run_folder]") {
  gputrain::test::TempDir dir;
  REQUIRE(run_gputrain("train --preset smoke --epochs 2 --output_dir " + (dir / "run")).exit_code == 0);
  const std::string last = dir / "run/checkpoints/last.pt";
  std::string bytes = gputrain::test::read_file(last);
  bytes.resize(bytes.size() / 2);  // torn
  gputrain::test::write_file(last, bytes);
  auto r = run_gputrain("train --output_dir " + (dir / "run") + " --resume auto --epochs 3");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("passing over " + last));
  CHECK_THAT(r.out, Catch::Contains("resumed from " + (dir / "run/checkpoints/epoch-2.pt") + ": epoch 3"));

  // With no intact checkpoint left, the run is not silently started again from zero.
  for (const auto& e : fs::directory_iterator(dir / "run/checkpoints"))
    if (e.path().extension() == ".pt") gputrain::test::write_file(e.path().string(), "torn");
  const auto before = snapshot(dir / "run");
  auto none = run_gputrain("train --output_dir " + (dir / "run") + " --resume auto --epochs 4");
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::Contains("restore a checkpoint from a backup"));
  CHECK(snapshot(dir / "run") == before);
}

TEST_CASE("run folder: where flock is refused, an exclusive lock file, a crashed holder's is taken over",
          "[run_folder]") {
  gputrain::test::TempDir dir;
  auto r = run_gputrain(kSmoke + "--output_dir " + (dir / "run"), "GPUTRAIN_FAULT_NO_FLOCK=1");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("refuses flock") && Catch::Contains(".lock-exclusive"));
  CHECK_FALSE(fs::exists(dir / "run/.lock-exclusive"));  // released at the end

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  // Left by a process that is gone (a crash): taken over.
  gputrain::test::write_file(dir / "run/.lock-exclusive", "pid 999999999 on host " + std::string(host) + "\n");
  auto again = run_gputrain(kSmoke + "--output_dir " + (dir / "run") + " --resume auto", "GPUTRAIN_FAULT_NO_FLOCK=1");
  INFO(again.out << again.err);
  CHECK(again.exit_code == 0);
  // Held by a live process (this test): refused, naming it.
  const std::string holder = "pid " + std::to_string(getpid()) + " on host " + host;
  gputrain::test::write_file(dir / "run/.lock-exclusive", holder + "\n");
  auto held = run_gputrain(kSmoke + "--output_dir " + (dir / "run") + " --resume auto", "GPUTRAIN_FAULT_NO_FLOCK=1");
  CHECK(held.exit_code == 2);
  CHECK_THAT(held.err, Catch::Contains("in use by another gputrain run (" + holder + ")"));
  // A live process that is no gputrain (its number taken again), and a file a crash left before
  // its note was written: both taken over.
  const pid_t sleeper = fork();
  if (sleeper == 0) {
    execlp("sleep", "sleep", "60", nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100 && gputrain::test::read_file("/proc/" + std::to_string(sleeper) + "/comm") != "sleep\n"; ++i)
    usleep(20000);  // until it runs sleep
  gputrain::test::write_file(dir / "run/.lock-exclusive", "pid " + std::to_string(sleeper) + " on host " + host + "\n");
  auto reused = run_gputrain(kSmoke + "--output_dir " + (dir / "run") + " --resume auto", "GPUTRAIN_FAULT_NO_FLOCK=1");
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
  INFO(reused.out << reused.err);
  CHECK(reused.exit_code == 0);
  gputrain::test::write_file(dir / "run/.lock-exclusive", "");
  fs::last_write_time(dir / "run/.lock-exclusive", fs::file_time_type::clock::now() - std::chrono::minutes(1));
  auto empty = run_gputrain(kSmoke + "--output_dir " + (dir / "run") + " --resume auto", "GPUTRAIN_FAULT_NO_FLOCK=1");
  INFO(empty.out << empty.err);
  CHECK(empty.exit_code == 0);
}

// The lock is a regular file of the folder's own: a link there would have the holder's note
// written over the file it points to (anywhere), and a pipe would block the start for good.
TEST_CASE("run folder: a .lock that is a link or a pipe is refused in one line, and its target is untouched",
          "[run_folder]") {
  gputrain::test::TempDir dir;
  gputrain::test::write_file(dir / "victim.txt", "precious\n");
  fs::create_directories(dir / "link");
  fs::create_symlink(dir / "victim.txt", dir / "link/.lock");
  fs::create_directories(dir / "pipe");
  REQUIRE(mkfifo((dir / "pipe/.lock").c_str(), 0644) == 0);
  for (const char* run : {"link", "pipe"}) {
    auto r = run_gputrain(kSmoke + "--output_dir " + (dir / run));
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: cannot lock output_dir '" + (dir / run) + "': " +
                                        (dir / run) + "/.lock is not a regular file"));
  }
  CHECK(gputrain::test::read_file(dir / "victim.txt") == "precious\n");
  CHECK(fs::is_symlink(dir / "link/.lock"));
}

TEST_CASE("run folder: a record torn by a crash stays one skipped line, the records after it are whole",
          "[run_folder]") {
  gputrain::test::TempDir dir;
  REQUIRE(run_gputrain(kSmoke + "--output_dir " + (dir / "run")).exit_code == 0);
  const std::string metrics = dir / "run/metrics.jsonl", monitor = dir / "run/monitor.csv";
  gputrain::test::write_file(metrics, gputrain::test::read_file(metrics) + "{\"event\": \"st");  // torn
  gputrain::test::write_file(monitor, gputrain::test::read_file(monitor) + "0.51,9");             // torn
  auto r = run_gputrain("train --output_dir " + (dir / "run") + " --resume auto --epochs 2 --monitor_interval 0.05");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  int torn = 0, summaries = 0;
  std::istringstream lines(gputrain::test::read_file(metrics));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
      ++torn;
    else if (j["event"] == "summary")
      ++summaries;
  }
  CHECK(torn == 1);
  CHECK(summaries == 2);  // the first session's and the resumed one's
  CHECK(fs::exists(dir / "run/report.html"));
  // monitor.csv: the torn row is a line of its own; the rows appended after it are whole.
  std::istringstream rows(gputrain::test::read_file(monitor));
  std::string header, row;
  std::getline(rows, header);
  int whole = 0, short_rows = 0;
  while (std::getline(rows, row))
    (std::count(row.begin(), row.end(), ',') == std::count(header.begin(), header.end(), ',') ? whole : short_rows)++;
  CHECK(short_rows == 1);
  CHECK(whole > 0);
}

TEST_CASE("monitor: a full disk is an error the run reports, not a crash of the sampler's thread", "[run_folder]") {
  gputrain::Monitor full("/dev/full", 0.01, {});
  CHECK(full.write_error() == "writing /dev/full: No space left on device");
  full.finish();
}

TEST_CASE("metrics: a full disk is one error naming the file", "[run_folder]") {
  try {
    gputrain::MetricsWriter full("/dev/full");
    full.write({{"event", "step"}});
    FAIL("expected an error");
  } catch (const gputrain::Error& e) {
    CHECK(e.exit_code == 1);
    CHECK(e.problems.front() == "writing /dev/full: No space left on device");
  }
}

TEST_CASE("run folder: a full disk during a checkpoint save is one error line, the previous checkpoint stays",
          "[run_folder]") {
  gputrain::test::TempDir dir;
  SmallDisk disk(dir / "disk", "8m");
  if (!disk.mounted) {
    WARN("cannot mount a tmpfs here (needs root): full-disk case not run");
    return;
  }
  const std::string run = disk.dir + "/run";
  REQUIRE(run_gputrain(kSmoke + "--output_dir " + run).exit_code == 0);
  const auto last = gputrain::test::read_file(run + "/checkpoints/last.pt");
  disk.fill_leaving(64);  // room for records, not for a checkpoint

  auto full = run_gputrain("train --output_dir " + run + " --resume auto --epochs 3");
  CHECK(full.exit_code == 1);
  CHECK_THAT(full.err, Catch::Contains("gputrain: error: writing " + run + "/checkpoints/epoch-2.pt: No space left on device"));
  CHECK_THAT(full.err, !Catch::Contains("frame #"));  // no library stack trace
  CHECK(gputrain::test::read_file(run + "/checkpoints/last.pt") == last);
  for (const auto& e : fs::directory_iterator(run + "/checkpoints")) CHECK(e.path().extension() != ".tmp");

  fs::remove(disk.dir + "/filler");  // space again: the run goes on from the intact checkpoint
  auto resumed = run_gputrain("train --output_dir " + run + " --resume auto --epochs 3");
  CHECK(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("epoch 3/3"));

  // A full disk at the start: the error, not an empty config.json.
  disk.fill_leaving(0);
  auto start = run_gputrain(kSmoke + "--output_dir " + disk.dir + "/second");
  CHECK(start.exit_code == 1);
  CHECK_THAT(start.err, Catch::Contains("No space left on device"));
  CHECK(!fs::exists(disk.dir + "/second/config.json"));
}

TEST_CASE("run folder: a path too long for the file system is exit 2 in one short line", "[run_folder]") {
  gputrain::test::TempDir dir;
  gputrain::test::write_file(dir / "long.json", "{\"output_dir\": \"" + (dir / std::string(1'000'000, 'c')) + "\"}");
  auto r = run_gputrain(kSmoke + "--config " + (dir / "long.json"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("path too long for the file system") && Catch::Contains("(1000"));
  CHECK(r.err.size() < 1000);
}

TEST_CASE("outputs: on a full disk eval, infer and benchmark fail in one line and leave the old files as they were",
          "[run_folder]") {
  gputrain::test::TempDir dir;
  REQUIRE(run_gputrain(kSmoke + "--output_dir " + (dir / "run")).exit_code == 0);
  SmallDisk disk(dir / "disk", "1m");
  if (!disk.mounted) {
    WARN("cannot mount a tmpfs here (needs root): full-disk case not run");
    return;
  }
  const std::string checkpoint = dir / "run/checkpoints/last.pt";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"eval.json", "eval --checkpoint " + checkpoint + " --json "},
      {"preds.csv", "infer --checkpoint " + checkpoint + " --out "},
      {"bench.json", "benchmark --preset smoke --variants baseline --warmup_steps 1 --steps 2 --json "},
  };
  for (const auto& [name, args] : runs) gputrain::test::write_file(disk.dir + "/" + name, "the previous " + name);
  disk.fill_leaving(0);
  for (const auto& [name, args] : runs) {
    const std::string out = disk.dir + "/" + name;
    auto r = run_gputrain(args + out);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("gputrain: error: writing " + out + ": No space left on device"));
    CHECK(gputrain::test::read_file(out) == "the previous " + name);
    CHECK_FALSE(fs::exists(out + ".tmp"));
  }
}

namespace {

mode_t kind_of(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

}  // namespace

TEST_CASE("outputs: a symlink's file is replaced in its own folder, a pipe and a device are written through",
          "[run_folder]") {
  gputrain::test::TempDir dir;
  REQUIRE(run_gputrain(kSmoke + "--output_dir " + (dir / "run")).exit_code == 0);
  const std::string checkpoint = dir / "run/checkpoints/last.pt";
  const std::string infer = "infer --checkpoint " + checkpoint + " --out ";
  fs::create_directories(dir / "shared");

  // A link to a file: the link stays, the file it names gets the rows, no temporary file is left.
  gputrain::test::write_file(dir / "shared/preds.csv", "old");
  fs::create_symlink("shared/preds.csv", dir / "link.csv");
  auto linked = run_gputrain(infer + (dir / "link.csv"));
  INFO(linked.err);
  REQUIRE(linked.exit_code == 0);
  CHECK(kind_of(dir / "link.csv") == S_IFLNK);
  CHECK_THAT(gputrain::test::read_file(dir / "shared/preds.csv"), Catch::StartsWith("index,"));
  CHECK_FALSE(fs::exists(dir / "shared/preds.csv.tmp"));
  // A dangling link: the file it names is made; export goes through the same writer.
  fs::create_symlink(dir / "shared/final.safetensors", dir / "final.safetensors");
  REQUIRE(run_gputrain("export --checkpoint " + checkpoint + " --out " + (dir / "final.safetensors")).exit_code == 0);
  CHECK(kind_of(dir / "final.safetensors") == S_IFLNK);
  CHECK(kind_of(dir / "shared/final.safetensors") == S_IFREG);

  // A named pipe: its reader gets the rows and the pipe stays a pipe.
  const std::string pipe = dir / "pipe";
  REQUIRE(::mkfifo(pipe.c_str(), 0644) == 0);
  std::string piped;
  std::thread reader([&] { piped = gputrain::test::read_file(pipe); });
  auto through_pipe = run_gputrain(infer + pipe);
  reader.join();
  CHECK(through_pipe.exit_code == 0);
  CHECK_THAT(piped, Catch::StartsWith("index,"));
  CHECK(kind_of(pipe) == S_IFIFO);

  // A device: a scratch copy of /dev/full (never the machine's own) reports its own error, and
  // stays a device. Making a device node needs root, as CI runs.
  const std::string full = dir / "full";
  if (::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    WARN("cannot make a device node here (needs root): the device case is not run");
    return;
  }
  const int probe = ::open(full.c_str(), O_WRONLY);
  if (probe < 0) {
    WARN("this file system refuses device nodes (nodev): the device case is not run");
    return;
  }
  ::close(probe);
  for (const std::string& args : {infer + full, "export --checkpoint " + checkpoint + " --out " + full}) {
    auto r = run_gputrain(args);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("gputrain: error: writing " + full + ": No space left on device"));
    CHECK(kind_of(full) == S_IFCHR);
    CHECK_FALSE(fs::exists(full + ".tmp"));
  }
}
