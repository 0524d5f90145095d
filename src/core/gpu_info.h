// One GPU as the machine reports it. Its own header because both the CUDA queries that fill it
// (core/device_cuda) and the machine probe that holds a list of them (core/device_probe) need it,
// and the probe calls the queries: in either of the two it would make them include each other.
#pragma once
#include <cstdint>
#include <string>

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

}  // namespace gputrain
