// What the machine has (GPUs, CPU, library versions), probed once. Knows nothing of a Config:
// what to do with it is decided by the recipe resolver (train/resolve_recipe).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gputrain {

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  bool bf16 = false;  // native bfloat16 (compute capability >= 8.0)
  bool tf32 = false;  // TF32 tensor cores (compute capability >= 8.0)
  // Whether this torch has kernels for the GPU. The driver lists a GPU older than the wheel's
  // oldest architecture (a P100, sm_60, under CUDA 13 wheels built for sm_75 and newer), but
  // every kernel launch on it fails with "no kernel image is available".
  bool kernels = true;
};

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
