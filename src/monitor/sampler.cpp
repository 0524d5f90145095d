// A sampler thread: GPU telemetry through NVML and host stats, every interval, to monitor.csv.
// NVML is dlopen'd: machines without a driver have no libnvidia-ml, and gputrain must still run.
#include "monitor/sampler.h"

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/host_info.h"

namespace gputrain {
namespace {

// The few NVML types used, declared here (their layout is part of NVML's stable C ABI).
struct NvmlUtilization {
  unsigned int gpu, memory;
};
struct NvmlMemory {
  unsigned long long total, free, used;
};
constexpr const char* kMonitorHeader =
    "time_s,cpu_percent,rss_bytes,gpu_util,gpu_mem_util,gpu_mem_used_bytes,gpu_temp_c,gpu_power_w,sm_clock_mhz,"
    "throttle_reasons,gpu";
constexpr int kNvmlTemperatureGpu = 0;
constexpr int kNvmlClockSm = 1;

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// User + system CPU seconds of this process.
double process_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

struct Monitor::Nvml {
  int (*init)();
  int (*shutdown)();
  int (*handle)(unsigned int, void**);
  int (*utilization)(void*, NvmlUtilization*);
  int (*memory)(void*, NvmlMemory*);
  int (*temperature)(void*, int, unsigned int*);
  int (*power)(void*, unsigned int*);
  int (*clock)(void*, int, unsigned int*);
  int (*throttle)(void*, unsigned long long*);
};

Monitor::Monitor(const std::string& csv_path, double interval_s, std::vector<int> gpus)
    : interval_(interval_s), gpus_(std::move(gpus)) {
  if (interval_ <= 0) {
    status_ = "off (--monitor_interval 0)";
    return;
  }
  status_ = "host CPU and RSS every " + std::to_string(interval_).substr(0, 4) + " s";
  if (!gpus_.empty()) {
    // GPUTRAIN_NVML_LIBRARY names another copy (an unusual install, or the tests' stand-in).
    const char* env = std::getenv("GPUTRAIN_NVML_LIBRARY");
    const std::string library = env && *env ? env : "libnvidia-ml.so.1";
    nvml_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!nvml_) {
      status_ += "; no GPU telemetry (" + library + " not found)";
    } else {
      fn_ = std::make_unique<Nvml>();
      auto sym = [&](const char* name) { return dlsym(nvml_, name); };
      fn_->init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
      fn_->shutdown = reinterpret_cast<int (*)()>(sym("nvmlShutdown"));
      fn_->handle = reinterpret_cast<int (*)(unsigned int, void**)>(sym("nvmlDeviceGetHandleByIndex_v2"));
      fn_->utilization = reinterpret_cast<int (*)(void*, NvmlUtilization*)>(sym("nvmlDeviceGetUtilizationRates"));
      fn_->memory = reinterpret_cast<int (*)(void*, NvmlMemory*)>(sym("nvmlDeviceGetMemoryInfo"));
      fn_->temperature = reinterpret_cast<int (*)(void*, int, unsigned int*)>(sym("nvmlDeviceGetTemperature"));
      fn_->power = reinterpret_cast<int (*)(void*, unsigned int*)>(sym("nvmlDeviceGetPowerUsage"));
      fn_->clock = reinterpret_cast<int (*)(void*, int, unsigned int*)>(sym("nvmlDeviceGetClockInfo"));
      fn_->throttle =
          reinterpret_cast<int (*)(void*, unsigned long long*)>(sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
      // NVML's index is the physical one; with CUDA_VISIBLE_DEVICES remapping this may differ.
      bool all = fn_->init && fn_->handle && fn_->init() == 0;
      for (int g : gpus_) {
        void* device = nullptr;
        all = all && fn_->handle(static_cast<unsigned int>(g), &device) == 0;
        devices_.push_back(device);
      }
      if (all) {
        status_ += fmt::format("; GPU{} {} utilization, memory, temperature, power, SM clock, throttle reasons (NVML)",
                               gpus_.size() > 1 ? "s" : "", fmt::join(gpus_, ","));
      } else {
        status_ += "; no GPU telemetry (NVML did not initialize)";
        devices_.clear();
      }
    }
  }
  // Appends (a resumed run continues the file); the header goes into a new file only, and a
  // row torn by a crash is ended first, so that readers skip it and the rows after stay whole.
  csv_path_ = csv_path;
  csv_ = std::fopen(csv_path.c_str(), "a+");
  if (!csv_)
    write_error_ = "writing " + csv_path + ": " + std::strerror(errno);
  else if (std::fseek(csv_, 0, SEEK_END) == 0 && std::ftell(csv_) == 0)
    append(std::string(kMonitorHeader) + "\n");
  else if (std::fseek(csv_, -1, SEEK_END) == 0 && std::fgetc(csv_) != '\n' && std::fseek(csv_, 0, SEEK_END) == 0)
    append("\n");  // (a seek between reading and writing, as C requires)
  start_ = last_wall_s_ = now_s();
  last_cpu_s_ = process_cpu_s();
  thread_ = std::thread([this] { loop(); });
}

Monitor::~Monitor() {
  finish();
  if (!devices_.empty() && fn_->shutdown) fn_->shutdown();
  if (nvml_) dlclose(nvml_);
}

MonitorSample Monitor::sample() {
  MonitorSample s;
  double wall = now_s(), cpu = process_cpu_s();
  s.time_s = wall - start_;
  s.cpu_percent = wall > last_wall_s_ ? 100.0 * (cpu - last_cpu_s_) / (wall - last_wall_s_) : 0;
  last_wall_s_ = wall;
  last_cpu_s_ = cpu;
  s.rss_bytes = rss_bytes();
  for (size_t i = 0; i < devices_.size(); ++i) {
    void* device = devices_[i];
    GpuReading g;
    g.index = gpus_[i];
    NvmlUtilization u{};
    NvmlMemory mem{};
    unsigned int temp = 0, power_mw = 0, clock = 0;
    unsigned long long throttle = 0;
    if (fn_->utilization && fn_->utilization(device, &u) == 0) g.util = u.gpu, g.mem_util = u.memory;
    if (fn_->memory && fn_->memory(device, &mem) == 0) g.mem_used = static_cast<int64_t>(mem.used);
    if (fn_->temperature && fn_->temperature(device, kNvmlTemperatureGpu, &temp) == 0) g.temp_c = temp;
    if (fn_->power && fn_->power(device, &power_mw) == 0) g.power_w = power_mw / 1000.0;
    if (fn_->clock && fn_->clock(device, kNvmlClockSm, &clock) == 0) g.sm_clock_mhz = clock;
    if (fn_->throttle && fn_->throttle(device, &throttle) == 0) g.throttle_reasons = throttle;
    s.gpus.push_back(g);
  }
  return s;
}

void Monitor::loop() {
  std::unique_lock<std::mutex> lk(m_);
  while (!cv_.wait_for(lk, std::chrono::duration<double>(interval_), [&] { return stop_; })) {
    // Sampling and writing without the lock: a slow NVML call or a stalled file system must
    // not hold up finish() or the run's write_error() checks.
    lk.unlock();
    record();
    lk.lock();
  }
}

void Monitor::record() {
  MonitorSample s = sample();
  samples_.push_back(s);
  const std::string host = fmt::format("{:.3f},{:.1f},{},", s.time_s, s.cpu_percent, s.rss_bytes);
  std::string rows;
  for (const auto& g : s.gpus)
    rows += host + fmt::format("{:.0f},{:.0f},{},{:.0f},{:.1f},{:.0f},{},{}\n", g.util, g.mem_util, g.mem_used, g.temp_c,
                               g.power_w, g.sm_clock_mhz, g.throttle_reasons, g.index);
  append(rows.empty() ? host + ",,,,,,,\n" : rows);
}

void Monitor::append(const std::string& text) {
  if (!csv_) return;
  if (std::fwrite(text.data(), 1, text.size(), csv_) == text.size() && std::fflush(csv_) == 0) return;
  std::string error = "writing " + csv_path_ + ": " + std::strerror(errno);
  std::fclose(csv_);
  csv_ = nullptr;
  std::lock_guard<std::mutex> lk(error_m_);
  write_error_ = error;
}

std::string Monitor::write_error() {
  std::lock_guard<std::mutex> lk(error_m_);
  return write_error_;
}

nlohmann::json Monitor::finish() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
    record();  // the state at the end: a run shorter than one interval still has its row
  }
  if (csv_) {
    std::fclose(csv_);
    csv_ = nullptr;
  }
  nlohmann::json j = {{"samples", samples_.size()}};
  if (samples_.empty()) return j;
  double cpu = 0;
  int64_t peak_rss = 0;
  for (const auto& s : samples_) {
    cpu += s.cpu_percent;
    peak_rss = std::max(peak_rss, s.rss_bytes);
  }
  const double n = static_cast<double>(samples_.size());
  j["mean_cpu_percent"] = cpu / n;
  j["peak_rss_bytes"] = peak_rss;
  // Per GPU (every sample reads the same GPUs); the first one's figures also at the top level.
  for (size_t i = 0; i < samples_.front().gpus.size(); ++i) {
    double util = 0, power = 0, max_util = 0;
    int64_t peak_mem = 0;
    for (const auto& s : samples_) {
      const GpuReading& g = s.gpus[i];
      util += g.util;
      power += g.power_w;
      max_util = std::max(max_util, g.util);
      peak_mem = std::max(peak_mem, g.mem_used);
    }
    nlohmann::json gpu = {{"gpu", samples_.front().gpus[i].index},
                          {"mean_gpu_util", util / n},
                          {"max_gpu_util", max_util},
                          {"peak_gpu_mem_used_bytes", peak_mem},
                          {"mean_gpu_power_w", power / n}};
    if (i == 0)
      for (const auto& field : gpu.items())
        if (field.key() != "gpu") j[field.key()] = field.value();
    j["gpus"].push_back(gpu);
  }
  return j;
}

}  // namespace gputrain
