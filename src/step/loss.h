// The task's loss: cross-entropy for class labels (int64) or mixed class distributions; MSE, L1
// or Huber for float targets.
#pragma once
#include <string>

#include <torch/nn/functional/loss.h>

namespace gputrain {

struct LossSpec {
  std::string kind = "auto";  // auto (cross_entropy or mse by the targets) | mse | l1 | huber
  double label_smoothing = 0;
  double huber_delta = 1.0;
  // Classification trained on float targets [B, classes] (MixUp, CutMix): the cross-entropy
  // against those distributions, any label smoothing being folded into them already.
  bool soft_targets = false;
};

// `out` is the model output in any dtype (autocast); the loss is computed in float32. The mean
// over every value (as nn.MSELoss etc.), or with `sum` the sum over samples (for evaluation).
inline torch::Tensor task_loss(const torch::Tensor& out, const torch::Tensor& y, const LossSpec& spec = {},
                               bool sum = false) {
  namespace F = torch::nn::functional;
  auto o = out.to(torch::kFloat);
  if (spec.soft_targets && y.is_floating_point()) {
    auto per_sample = -(y * torch::log_softmax(o, -1)).sum(-1);
    return sum ? per_sample.sum() : per_sample.mean();
  }
  if (y.scalar_type() == torch::kLong) {
    auto opt = F::CrossEntropyFuncOptions().label_smoothing(spec.label_smoothing);
    if (sum) opt = opt.reduction(torch::kSum);
    return F::cross_entropy(o, y, opt);
  }
  o = o.reshape(y.sizes());
  torch::Tensor total;
  if (spec.kind == "l1")
    total = F::l1_loss(o, y, F::L1LossFuncOptions().reduction(torch::kSum));
  else if (spec.kind == "huber")
    total = F::huber_loss(o, y, F::HuberLossFuncOptions().reduction(torch::kSum).delta(spec.huber_delta));
  else
    total = F::mse_loss(o, y, F::MSELossFuncOptions().reduction(torch::kSum));
  return sum ? total / (y.dim() > 1 ? y.size(1) : 1) : total / y.numel();
}

}  // namespace gputrain
