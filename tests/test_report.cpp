// Monitoring and the run report: monitor.csv, report.html with its plots, `gputrain report`.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gputrain;
namespace fs = std::filesystem;

TEST_CASE("a run writes monitor.csv and a self-contained report.html", "[report]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  auto r = test::run_gputrain(
      "train --preset smoke --epochs 2 --synthetic_train_size 2048 --monitor_interval 0.2 "
      "--output_dir " +
      run);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("monitor: host CPU and RSS every 0.20 s") && Catch::Contains("peak RSS"));

  std::string csv = test::read_file(run + "/monitor.csv");
  CHECK(csv.rfind("time_s,cpu_percent,rss_bytes,gpu_util", 0) == 0);

  // Each epoch's record carries its throughput, MFU and memory peak.
  int epochs = 0;
  std::istringstream lines(test::read_file(run + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    auto rec = nlohmann::json::parse(line);
    if (rec["event"] != "eval") continue;
    ++epochs;
    CHECK(rec["train_samples_per_sec"].get<double>() > 0);
    CHECK(rec["peak_rss_bytes"].get<double>() > 1e6);
    CHECK(rec["mfu"].get<double>() > 0);
    CHECK(rec["mfu"].get<double>() < 1);
  }
  CHECK(epochs == 2);

  std::string html = test::read_file(run + "/report.html");
  for (const char* part : {"<svg", "Training loss", "Test accuracy", "Learning rate", "Throughput", "Host RSS",
                           "Configuration", "batch_size", "polyline", "<h2>Epochs</h2>", "MFU", "peak RSS (host)"})
    CHECK_THAT(html, Catch::Contains(part));
  CHECK_THAT(html, !Catch::Contains("http://") && !Catch::Contains("https://"));  // no network

  // gputrain report rebuilds it, and includes a benchmark table when one was saved there.
  fs::remove(run + "/report.html");
  auto bench = test::run_gputrain(
      "benchmark --preset smoke --steps 2 --warmup_steps 1 --variants channels_last "
      "--json " +
      run + "/benchmark.json");
  REQUIRE(bench.exit_code == 0);
  auto rebuilt = test::run_gputrain("report " + run);
  REQUIRE(rebuilt.exit_code == 0);
  std::string again = test::read_file(run + "/report.html");
  CHECK_THAT(again,
             Catch::Contains("Training loss") && Catch::Contains("Benchmark") && Catch::Contains("channels_last"));
}

TEST_CASE("report on a folder without a run exits 2", "[report]") {
  test::TempDir dir;
  auto r = test::run_gputrain("report " + dir.path.string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("holds no run"));
  CHECK(test::run_gputrain("report").exit_code == 2);
}

TEST_CASE("monitoring can be turned off", "[report]") {
  test::TempDir dir;
  auto r = test::run_gputrain("train --preset smoke --epochs 1 --monitor_interval 0 --output_dir " + (dir / "run"));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("monitor: off"));
  CHECK_FALSE(fs::exists(dir / "run/monitor.csv"));
  CHECK(fs::exists(dir / "run/report.html"));
}
