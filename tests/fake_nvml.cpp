// A stand-in for libnvidia-ml.so.1 with fixed readings, so the sampler's NVML path runs in the
// tests on machines without a GPU driver (GPUTRAIN_NVML_LIBRARY points the sampler at it).
// It follows the NVML C ABI for the calls gputrain makes; FAKE_NVML_FAIL_INIT=1 fails nvmlInit.
#include <cstdlib>

extern "C" {

struct FakeUtilization {
  unsigned int gpu, memory;
};
struct FakeMemory {
  unsigned long long total, free, used;
};

static int g_device;  // the handle points here

int nvmlInit_v2() { return std::getenv("FAKE_NVML_FAIL_INIT") ? 1 : 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT: one GPU here
  *device = &g_device;
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, FakeUtilization* u) {
  *u = {75, 40};
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, FakeMemory* m) {
  *m = {80ull << 30, 75ull << 30, 5ull << 30};
  return 0;
}
int nvmlDeviceGetTemperature(void*, int sensor, unsigned int* t) {
  *t = sensor == 0 ? 65 : 0;
  return 0;
}
int nvmlDeviceGetPowerUsage(void*, unsigned int* milliwatts) {
  *milliwatts = 250000;
  return 0;
}
int nvmlDeviceGetClockInfo(void*, int type, unsigned int* mhz) {
  *mhz = type == 1 ? 1755 : 0;  // NVML_CLOCK_SM
  return 0;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(void*, unsigned long long* reasons) {
  *reasons = 4;  // applications clocks setting
  return 0;
}
}
