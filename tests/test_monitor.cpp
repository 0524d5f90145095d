// The sampler: host stats always; GPU telemetry through NVML, here from a stand-in library
// (tests/fake_nvml.cpp) with fixed readings, so the NVML path runs without a GPU driver.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "monitor/report_html.h"
#include "monitor/sampler.h"
#include "test_util.h"

using namespace gputrain;

namespace {

// Sets an environment variable for one scope.
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const std::string& value) : name(n) { setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name); }
};

// Lets the sampler write a few rows (polling the file, not trusting a fixed sleep), then stops it.
nlohmann::json sample_a_while(Monitor& m, const std::string& csv) {
  for (int i = 0; i < 500; ++i) {
    std::string text = test::read_file(csv);
    if (std::count(text.begin(), text.end(), '\n') >= 4) break;  // the header and three rows
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return m.finish();
}

}  // namespace

TEST_CASE("monitor: NVML readings reach monitor.csv and the summary", "[monitor]") {
  test::TempDir dir;
  ScopedEnv nvml("GPUTRAIN_NVML_LIBRARY", FAKE_NVML_PATH);
  Monitor m(dir / "monitor.csv", 0.01, {0});
  CHECK_THAT(m.status(), Catch::Contains("GPU 0 utilization, memory, temperature, power, SM clock, throttle reasons"));
  auto j = sample_a_while(m, dir / "monitor.csv");
  REQUIRE(j["samples"].get<int>() >= 3);
  CHECK(j["mean_gpu_util"].get<double>() == 75.0);
  CHECK(j["max_gpu_util"].get<double>() == 75.0);
  CHECK(j["peak_gpu_mem_used_bytes"].get<int64_t>() == (int64_t{5} << 30));
  CHECK(j["mean_gpu_power_w"].get<double>() == 250.0);
  CHECK(j["peak_rss_bytes"].get<int64_t>() > 0);
  std::string csv = test::read_file(dir / "monitor.csv");
  CHECK_THAT(csv, Catch::StartsWith("time_s,cpu_percent,rss_bytes,gpu_util,gpu_mem_util,gpu_mem_used_bytes,"
                                    "gpu_temp_c,gpu_power_w,sm_clock_mhz,throttle_reasons,gpu\n"));
  CHECK_THAT(csv, Catch::Contains(",75,40,5368709120,65,250.0,1755,4,0\n"));

  // The report charts them.
  test::write_file(dir / "metrics.jsonl", "{\"event\":\"step\",\"step\":1,\"loss\":1.0}\n");
  std::string html = test::read_file(write_html_report(dir.path.string()));
  for (const char* chart : {"GPU utilization (%)", "GPU memory used (GiB)", "GPU power (W)", "GPU temperature (C)"})
    CHECK_THAT(html, Catch::Contains(chart));
  CHECK_THAT(html, !Catch::Contains("no GPU telemetry"));
}

TEST_CASE("monitor: without working NVML, host stats only and one line says why", "[monitor]") {
  test::TempDir dir;
  SECTION("no library") {
    ScopedEnv nvml("GPUTRAIN_NVML_LIBRARY", dir / "libnvidia-ml.so.1");
    Monitor m(dir / "monitor.csv", 0.01, {0});
    CHECK_THAT(m.status(), Catch::Contains("no GPU telemetry (" + (dir / "libnvidia-ml.so.1") + " not found)"));
    auto j = sample_a_while(m, dir / "monitor.csv");
    CHECK(j.contains("mean_cpu_percent"));
    CHECK_FALSE(j.contains("mean_gpu_util"));
    CHECK_THAT(test::read_file(dir / "monitor.csv"), Catch::Contains(",,,,,,,\n"));
  }
  SECTION("NVML does not initialize") {
    ScopedEnv nvml("GPUTRAIN_NVML_LIBRARY", FAKE_NVML_PATH);
    ScopedEnv fail("FAKE_NVML_FAIL_INIT", "1");
    Monitor m(dir / "monitor.csv", 0.01, {0});
    CHECK_THAT(m.status(), Catch::Contains("no GPU telemetry (NVML did not initialize)"));
    CHECK_FALSE(m.finish().contains("mean_gpu_util"));
  }
  SECTION("no such GPU index") {
    ScopedEnv nvml("GPUTRAIN_NVML_LIBRARY", FAKE_NVML_PATH);
    Monitor m(dir / "monitor.csv", 0.01, {3});
    CHECK_THAT(m.status(), Catch::Contains("no GPU telemetry (NVML did not initialize)"));
  }
}

TEST_CASE("monitor: with data parallel, one telemetry row per GPU of the node in monitor.csv, the summary and the report",
          "[monitor]") {
  test::TempDir dir;
  ScopedEnv nvml("GPUTRAIN_NVML_LIBRARY", FAKE_NVML_PATH);  // two GPUs: 75% and 50% busy
  Monitor m(dir / "monitor.csv", 0.01, {0, 1});
  CHECK_THAT(m.status(), Catch::Contains("GPUs 0,1 utilization"));
  auto j = sample_a_while(m, dir / "monitor.csv");
  REQUIRE(j["gpus"].size() == 2);
  CHECK(j["gpus"][0]["gpu"] == 0);
  CHECK(j["gpus"][0]["mean_gpu_util"].get<double>() == 75.0);
  CHECK(j["gpus"][1]["gpu"] == 1);
  CHECK(j["gpus"][1]["mean_gpu_util"].get<double>() == 50.0);
  CHECK(j["mean_gpu_util"].get<double>() == 75.0);  // the first GPU's, as with one
  const std::string csv = test::read_file(dir / "monitor.csv");
  CHECK_THAT(csv, Catch::Contains(",75,40,5368709120,65,250.0,1755,4,0\n") && Catch::Contains(",50,40,5368709120,65,250.0,1755,4,1\n"));

  test::write_file(dir / "metrics.jsonl", "{\"event\":\"step\",\"step\":1,\"loss\":1.0}\n" +
                                              nlohmann::json({{"event", "summary"}, {"step", 1}, {"monitor", j}}).dump() + "\n");
  const std::string html = test::read_file(write_html_report(dir.path.string()));
  CHECK_THAT(html, Catch::Contains("GPU 0") && Catch::Contains("GPU 1"));
  CHECK_THAT(html, Catch::Contains("<tr><td>GPU 1</td><td>50.0%</td><td>50.0%</td>"));
}
