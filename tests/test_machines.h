// Made-up machines for the recipe resolver, which is pure: a T4 or an H100 can be tested here.
#pragma once
#include <vector>

#include "core/device_probe.h"

namespace gputrain::test {

inline MachineInfo cpu_machine(bool bf16 = false) {
  MachineInfo m;
  m.cpu_model = "Test CPU";
  m.cpu_cores = 2;
  m.cpu_bf16 = bf16;
  m.default_threads = 2;
  return m;
}

inline GpuInfo t4(int index = 0, int64_t free_bytes = 15LL << 30) {
  return {index, "Tesla T4", 16LL << 30, free_bytes, 7, 5, 40, false, false};
}

inline GpuInfo h100(int index = 0, int64_t free_bytes = 79LL << 30) {
  return {index, "H100", 80LL << 30, free_bytes, 9, 0, 132, true, true};
}

inline MachineInfo gpu_machine(std::vector<GpuInfo> gpus) {
  MachineInfo m = cpu_machine();
  m.cuda_available = true;
  m.gpus = std::move(gpus);
  m.cuda_build = "13.0";
  m.cudnn = "9.10";
  return m;
}

}  // namespace gputrain::test
