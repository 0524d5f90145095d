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

static int g_devices[2] = {0, 1};  // two GPUs; the handle points at the index

int nvmlInit_v2() { return std::getenv("FAKE_NVML_FAIL_INIT") ? 1 : 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index > 1) return 2;  // NVML_ERROR_INVALID_ARGUMENT: two GPUs here
  *device = &g_devices[index];
  return 0;
}
int nvmlDeviceGetUtilizationRates(void* device, FakeUtilization* u) {
  *u = {*static_cast<int*>(device) == 0 ? 75u : 50u, 40};
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
