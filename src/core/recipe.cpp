// Applies a recipe's process-wide switches to torch.
#include "core/recipe.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/utils.h>

#include <cstdlib>

namespace gputrain {

void apply_global_switches(const Recipe& r) {
  if (r.threads > 0) at::set_num_threads(r.threads);
  torch::manual_seed(r.seed);  // seeds CPU and every CUDA device
  auto& g = at::globalContext();
  if (r.deterministic && r.cuda) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);  // cuBLAS needs it
  g.setDeterministicAlgorithms(r.deterministic, /*warn_only=*/false);
  g.setDeterministicCuDNN(r.cudnn_deterministic);
  g.setBenchmarkCuDNN(r.cudnn_benchmark);
  // The legacy TF32 switches: mixing them with the newer fp32-precision API makes torch raise.
  g.setAllowTF32CuBLAS(r.tf32);
  g.setAllowTF32CuDNN(r.tf32);
}

}  // namespace gputrain
