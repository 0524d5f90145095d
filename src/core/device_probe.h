// What the machine has (GPUs, CPU, library versions), probed once. Knows nothing of a Config:
// what to do with it is decided by the recipe resolver (train/resolve_recipe).
#pragma once
#include <string>
#include <vector>

#include "core/gpu_info.h"

namespace gputrain {

struct MachineInfo {
  bool cuda_available = false;  // torch sees a CUDA device and its driver
  std::vector<GpuInfo> gpus;
  std::string cpu_model;
  int cpu_cores = 0;
  bool cpu_bf16 = false;          // native bf16 instructions (AVX512-BF16 or AMX)
  int default_threads = 0;        // torch's intra-op thread count before any --threads
  std::string cuda_build, cudnn;  // versions torch was built with ("n/a" without CUDA)
};

// `gpus` false skips the GPU query, which would create a CUDA context on every GPU (hundreds of
// MB each) for a process that asked for the CPU.
MachineInfo probe_machine(bool gpus = true);

}  // namespace gputrain
