// --profile: Kineto's trace of a range of steps, its operators by self time, and the hostile
// cases (a backward range, one past the run's end, a stop inside it, a folder it cannot write).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "monitor/profiler.h"
#include "test_util.h"

using namespace gputrain;

namespace {

const std::string kTrain =
    "train --dataset synthetic --input_shape 1x12x12 --num_classes 4 --synthetic_train_size 256 --synthetic_test_size 32 "
    "--model cnn --width 8 --batch_size 16 --epochs 1 --threads 1 ";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("profile: self time is a call's time minus its callees', per thread", "[monitor]") {
  // step [0, 100) holds forward [10, 50) holding addmm [20, 40); another thread's op overlaps.
  const auto ops = self_times({{"gputrain::step", 1, 0, 100000, true},
                               {"gputrain::forward", 1, 10000, 50000, true},
                               {"aten::addmm", 1, 20000, 40000, false},
                               {"aten::addmm", 2, 30000, 90000, false},
                               {"kernel", 7, 20000, 30000, false, true}});
  auto find = [&](const std::string& name) {
    for (const auto& op : ops)
      if (op.name == name) return op;
    FAIL("no " << name);
    return ProfiledOp{};
  };
  CHECK(find("gputrain::step").self_us == Approx(60));
  CHECK(find("gputrain::forward").self_us == Approx(20));
  CHECK(find("aten::addmm").self_us == Approx(80));
  CHECK(find("aten::addmm").calls == 2);
  CHECK(find("kernel").device);
  CHECK(ops.front().name == "aten::addmm");  // sorted by self time
}

TEST_CASE("profile: --profile 3:6 writes a trace with gputrain's regions and aten operators, and ops.csv covers the "
          "recorded steps",
          "[monitor][cli]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  auto r = test::run_gputrain(kTrain + "--num_workers 0 --max_steps 10 --profile 3:6 --output_dir " + run);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("profile: steps 4-6"));
  CHECK(r.err.empty());  // Kineto's own lines (gpuGetDeviceCount, tracing markers) stay out
  const auto trace = nlohmann::json::parse(read(run + "/profile/trace.json"));
  std::set<std::string> names;
  for (const auto& e : trace.at("traceEvents")) names.insert(e.value("name", ""));
  for (const char* region : {"gputrain::step", "gputrain::data_wait", "gputrain::forward", "gputrain::backward",
                             "gputrain::optimizer", "gputrain::load_batch", "aten::convolution_backward"})
    CHECK(names.count(region));
  // Self times split the recorded steps' wall time: operators' and regions' self times on the
  // host add up to it (each row rounded to 1e-4). The operators' own share is not checked: it is
  // a timing figure (0.87 on an idle machine here, 0.46 with two busy neighbours, as in ctest -j2).
  std::ifstream csv(run + "/profile/ops.csv");
  std::string line;
  std::getline(csv, line);
  CHECK(line == "name,kind,calls,self_us,total_us,self_share,input_shapes");
  double host = 0, operators = 0;
  while (std::getline(csv, line)) {
    REQUIRE(line.back() == ',');  // no shapes without ":shapes"
    line.pop_back();
    const double share = std::stod(line.substr(line.rfind(',') + 1));
    if (line.find(",device,") == std::string::npos) host += share;
    if (line.find(",operator,") != std::string::npos) operators += share;
  }
  CHECK(host == Approx(1).margin(0.01));
  CHECK(operators > 0);
  // The memory at each recorded step's start and end.
  std::ifstream memory(run + "/profile/memory.csv");
  std::getline(memory, line);
  CHECK(line == "step,phase,ms,rss_bytes,cuda_allocated_bytes");
  std::vector<std::string> rows;
  std::string last_row;
  while (std::getline(memory, line)) {
    rows.push_back(line.substr(0, line.find(',', line.find(',') + 1)));
    last_row = line;
  }
  CHECK(rows == std::vector<std::string>{"4,start", "4,end", "5,start", "5,end", "6,start", "6,end"});
  last_row.pop_back();  // the empty cuda_allocated_bytes: its comma
  CHECK(std::stod(last_row.substr(last_row.rfind(',') + 1)) > 1e6);  // RSS, bytes
  // The profiled steps are left out of the throughput, and the summary says so.
  CHECK_THAT(read(run + "/metrics.jsonl"), Catch::Contains("\"profiled_steps\":3,\"samples_per_sec\""));
  // report.html shows it: the regions, the operators' bars, the link to the trace.
  const std::string html = read(run + "/report.html");
  CHECK_THAT(html, Catch::Contains("<h2>Profile</h2>") && Catch::Contains("<a href=\"profile/trace.json\">") &&
                       Catch::Contains("backward ") && Catch::Contains("<td>aten::convolution_backward</td>"));
}

TEST_CASE("profile: :shapes splits operators by input shapes, and GPUTRAIN_PROFILE records a whole command",
          "[monitor][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain(kTrain + "--num_workers 0 --max_steps 3 --profile 1:2:shapes --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // The first convolution of the CNN: a batch of 16 one-channel 12x12 images, 8 filters of 3x3.
  CHECK_THAT(read(dir / "run/profile/ops.csv"),
             Catch::Contains("aten::convolution,operator,1,") && Catch::Contains("\"[[16, 1, 12, 12], [8, 1, 3, 3]"));

  // eval writes no run folder: --profile is refused there, and the variable records the command.
  const std::string eval = "eval --checkpoint " + (dir / "run/checkpoints/last.pt");
  auto refused = test::run_gputrain(eval + " --profile 1:2");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("flag --profile is train's (its run folder): eval writes none; "
                                          "GPUTRAIN_PROFILE=DIR records any command"));
  auto whole = test::run_gputrain(eval, "GPUTRAIN_PROFILE=" + (dir / "eval-profile"));
  INFO(whole.out << whole.err);
  CHECK(whole.exit_code == 0);
  CHECK_THAT(whole.err, Catch::StartsWith("profile: the command (") && Catch::Contains("eval-profile/trace.json"));
  CHECK_THAT(read(dir / "eval-profile/ops.csv"), Catch::Contains("aten::convolution,operator,"));
  const auto trace = nlohmann::json::parse(read(dir / "eval-profile/trace.json"));  // kept: the loop reads inside it
  std::set<std::string> names;
  for (const auto& e : trace.at("traceEvents")) names.insert(e.value("name", ""));
  CHECK(names.count("gputrain::command"));
}

TEST_CASE("profile: a backward range is exit 2, and a range past the run's end, a stop inside it and an unwritable "
          "folder each say one line",
          "[monitor][cli]") {
  test::TempDir dir;
  auto bad = test::run_gputrain(kTrain + "--profile 5:3 --output_dir " + (dir / "bad"));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("profile '5:3' (expected START:STOP[:shapes] with 0 <= START < STOP"));
  CHECK(!std::filesystem::exists(dir / "bad"));

  auto past = test::run_gputrain(kTrain + "--max_steps 4 --profile 10:15 --output_dir " + (dir / "past"));
  INFO(past.out << past.err);
  CHECK(past.exit_code == 0);
  CHECK_THAT(past.out, Catch::Contains("--profile 10:15: the run ended at step 4, before step 11: nothing was recorded"));
  CHECK(!std::filesystem::exists(dir / "past/profile"));

  // SIGTERM after step 5 of a range 3:8: the steps recorded so far are written.
  auto stopped = test::run_gputrain(kTrain + "--max_steps 10 --log_every 1 --profile 3:8 --output_dir " + (dir / "stop"),
                                    "GPUTRAIN_FAULT_SIGTERM_STEP=5");
  INFO(stopped.out << stopped.err);
  CHECK(stopped.exit_code == 143);
  CHECK_THAT(stopped.out, Catch::Contains("profile: steps 4-5"));
  CHECK(nlohmann::json::parse(read(dir / "stop/profile/trace.json")).contains("traceEvents"));
  // Its resume does not record the range again (--profile is not kept in the run's record).
  auto resumed_stop = test::run_gputrain(kTrain + "--max_steps 10 --resume auto --output_dir " + (dir / "stop"));
  INFO(resumed_stop.out << resumed_stop.err);
  CHECK(resumed_stop.exit_code == 0);
  CHECK_THAT(resumed_stop.out, !Catch::Contains("profile:") && !Catch::Contains("--profile"));

  // A file where the profile folder would go: the run finishes and says the trace was not written.
  auto first = test::run_gputrain(kTrain + "--max_steps 3 --output_dir " + (dir / "run"));
  REQUIRE(first.exit_code == 0);
  { std::ofstream(dir / "run/profile") << "in the way"; }
  auto resumed = test::run_gputrain(kTrain + "--max_steps 8 --profile 4:6 --resume auto --output_dir " + (dir / "run"));
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("--profile 4:6: the profile of steps 5-6 could not be written to"));
  CHECK(read(dir / "run/profile") == "in the way");
}

TEST_CASE("profile: benchmark --explain names the step's shares and its convolutions, and refuses --until and --profile",
          "[monitor][bench][cli]") {
  const std::string bench =
      "benchmark --dataset synthetic --input_shape 1x12x12 --num_classes 4 --synthetic_train_size 256 "
      "--synthetic_test_size 32 --model cnn --width 8 --batch_size 16 --threads 1 --variants all --steps 5 "
      "--warmup_steps 2 ";
  auto r = test::run_gputrain(bench + "--explain");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matches(R"([\s\S]*explain \(all\): a [0-9.]+ ms step \(5 profiled\): forward [0-9]+%, )"
                                   R"(backward [0-9]+%, optimizer [0-9]+%, data_wait [0-9]+%; most host self time: )"
                                   R"([\s\S]*convolution[\s\S]*)"));
  auto refused = test::run_gputrain(bench + "--explain --until test_accuracy=0.5");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("--explain profiles timed steps"));
  // A benchmark writes no run folder: train's --profile and --tensorboard would be ignored.
  auto profile = test::run_gputrain(bench + "--profile 2:4 --tensorboard");
  CHECK(profile.exit_code == 2);
  CHECK_THAT(profile.err, Catch::Contains("flag --profile is train's (its run folder): benchmark writes none") &&
                              Catch::Contains("(--explain profiles the full recipe)") &&
                              Catch::Contains("flag --tensorboard is train's"));
}
