// The task's loss: cross-entropy for class labels (int64), mean squared error for float targets.
#pragma once
#include <torch/nn/functional/loss.h>

namespace gputrain {

// `out` is the model output in any dtype (autocast); the loss is computed in float32.
// `sum` gives the summed loss (evaluation) instead of the mean.
inline torch::Tensor task_loss(const torch::Tensor& out, const torch::Tensor& y, double label_smoothing = 0,
                               bool sum = false) {
  namespace F = torch::nn::functional;
  auto o = out.to(torch::kFloat);
  if (y.scalar_type() == torch::kLong) {
    auto opt = F::CrossEntropyFuncOptions().label_smoothing(label_smoothing);
    if (sum) opt = opt.reduction(torch::kSum);
    return F::cross_entropy(o, y, opt);
  }
  auto l = F::mse_loss(o.reshape(y.sizes()), y, F::MSELossFuncOptions().reduction(torch::kSum));
  // Summed over samples (eval) or averaged over every value (training), like nn.MSELoss.
  return sum ? l / (y.dim() > 1 ? y.size(1) : 1) : l / y.numel();
}

}  // namespace gputrain
