// A sampler thread: GPU telemetry through NVML (dlopen'd, optional) and host stats, written to
// monitor.csv every interval, summarized at the end of the run.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gputrain {

struct GpuReading {
  int index = 0;  // the GPU's index (as CUDA numbers it)
  double util = 0, mem_util = 0;
  int64_t mem_used = 0;
  double temp_c = 0, power_w = 0, sm_clock_mhz = 0;
  uint64_t throttle_reasons = 0;
};

struct MonitorSample {
  double time_s = 0;
  double cpu_percent = 0;  // this process, 100 = one core
  int64_t rss_bytes = 0;
  std::vector<GpuReading> gpus;  // one per monitored GPU that NVML answered for
};

class Monitor {
 public:
  // `gpus`: the GPUs to read (this process's, or with data parallel the node's); empty: host
  // stats only. interval_s <= 0: no sampling at all. monitor.csv holds one row per GPU per
  // sample, its `gpu` column naming the GPU.
  Monitor(const std::string& csv_path, double interval_s, std::vector<int> gpus);
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // One line for the device report: what is sampled, or why there is no GPU telemetry.
  const std::string& status() const { return status_; }
  // Mean CPU, peak RSS; mean/max utilization, peak memory, mean power of the first GPU, and of
  // each GPU under "gpus" (stops the sampler).
  nlohmann::json finish();
  // "writing <path>: <reason>" once a monitor.csv write failed (sampling goes on without the
  // file), else "". The run reports it from its own thread: the sampler's cannot stop it.
  std::string write_error();

 private:
  void loop();
  MonitorSample sample();
  void record();  // one sample, kept and written as a row
  void append(const std::string& text);  // to monitor.csv: by the sampler's thread (or before it starts)

  std::string status_;
  double interval_;
  std::vector<int> gpus_;
  void* nvml_ = nullptr;           // dlopen handle
  std::vector<void*> devices_;     // nvmlDevice_t of each of gpus_; empty without NVML
  struct Nvml;              // the NVML entry points (resolved with dlsym)
  std::unique_ptr<Nvml> fn_;
  std::FILE* csv_ = nullptr;
  std::string csv_path_;
  std::mutex error_m_;
  std::string write_error_;  // under error_m_
  std::vector<MonitorSample> samples_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  double start_ = 0, last_cpu_s_ = 0, last_wall_s_ = 0;
};

}  // namespace gputrain
