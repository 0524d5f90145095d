// Synchronized BatchNorm (--sync_bn): normalization with the statistics of the global batch, as
// PyTorch's SyncBatchNorm. The sums go over the ranks through a callback (an all-reduce of the
// job's Comm), so this math knows no process group and the models know no parallel code.
#pragma once
#include <functional>

#include <torch/types.h>

namespace gputrain {

// Sums `t` over the ranks in place, returning when the sum is there.
using SumOverRanks = std::function<void(torch::Tensor& t)>;

// Global-batch normalization of `x` ([N, C, ...]); updates the running statistics with the global
// mean and unbiased variance. Differentiable in x, weight and bias. `sum` must outlive backward.
torch::Tensor sync_batch_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              torch::Tensor& running_mean, torch::Tensor& running_var, double momentum, double eps,
                              const SumOverRanks& sum);

}  // namespace gputrain
