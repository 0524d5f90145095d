// `gputrain launch`: starts the local ranks of a data-parallel job with torchrun's environment,
// prefixes their output with the rank, forwards SIGINT/SIGTERM, and when one fails stops the
// others and exits with its code. Torch-free.
#pragma once
#include <string>
#include <vector>

namespace gputrain {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1, node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;                // 0: a free port on this machine (one node only)
  std::string exe;                    // the program each rank runs (this gputrain)
  std::vector<std::string> command;   // its arguments: a command and its flags
  double grace_seconds = 15;          // after a stop is forwarded, then SIGKILL
};

// Runs the ranks to the end. Returns 0 when all exit 0; the first failing rank's exit code
// (128 + N for a death by signal N); 128 + N when the launcher itself got signal N.
int launch(const LaunchOptions& options);

// GPUs this process can see, without loading CUDA: CUDA_VISIBLE_DEVICES when set, else the
// driver's /proc/driver/nvidia/gpus entries.
int visible_gpu_count();

// A TCP port free on 127.0.0.1 now (the kernel picks it; closed before returning).
int free_port();

}  // namespace gputrain
