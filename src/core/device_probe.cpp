// Probes the machine once: GPUs through torch's CUDA context, the CPU from /proc.
#include "core/device_probe.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <thread>

#include "core/device_cuda.h"
#include "core/host_info.h"

namespace gputrain {

MachineInfo probe_machine(bool gpus) {
  MachineInfo m;
  m.cuda_available = torch::cuda::is_available();
  if (gpus) m.gpus = query_gpus();
  m.cpu_model = cpu_model();
  m.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  m.cpu_bf16 = cpu_has_bf16();
  // Read before any Session sets --threads: "auto" must mean torch's own default each time.
  static const int torch_default_threads = at::get_num_threads();
  m.default_threads = torch_default_threads;
  m.cuda_build = cuda_build_version();
  m.cudnn = cudnn_version();
  return m;
}

}  // namespace gputrain
