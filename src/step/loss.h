// The task's loss: cross-entropy for class labels (int64), a class per token ([B, T] labels,
// -100 not counted), or mixed class distributions; a binary cross-entropy per label for several
// 0/1 labels per sample (multi-label); MSE, L1 or Huber for float targets.
#pragma once
#include <string>

#include <torch/nn/functional/loss.h>

namespace gputrain {

struct LossSpec {
  std::string kind = "auto";  // auto (cross_entropy or mse by the targets) | mse | l1 | huber | bce
  double label_smoothing = 0;
  double huber_delta = 1.0;
  // Classification trained on float targets [B, classes] (MixUp, CutMix): the cross-entropy
  // against those distributions, any label smoothing being folded into them already.
  bool soft_targets = false;
  // A per-token cross-entropy computes a language model's head with it, in chunks of tokens
  // (step/head_loss.h; --fused_head_loss): the full logits are never held.
  bool fused_head = true;
  // --class_weights: cross-entropy's weight per class, or bce's pos_weight per label; the
  // training loss's alone (evaluation sums, sum = true, are unweighted). Undefined = none.
  torch::Tensor class_weights;
};

// The value cross-entropy ignores in a per-token target: padding, prompts, what is not trained on.
inline constexpr int64_t kIgnoreIndex = -100;

// A class per position ([B, T] int64 labels): the loss is averaged over the counted positions
// (the labels that are not kIgnoreIndex), over the whole step.
inline bool per_token(const torch::Tensor& y) { return y.scalar_type() == torch::kLong && y.dim() >= 2; }
inline torch::Tensor counted_tokens(const torch::Tensor& y) { return y.ne(kIgnoreIndex).sum().to(torch::kFloat); }

// `out` is the model output in any dtype (autocast); the loss is computed in float32. The mean
// over every value (as nn.MSELoss etc.; a per-token target's mean over its counted tokens), or
// with `sum` the sum over samples (over counted tokens), for evaluation and for a step that
// divides by its own count.
inline torch::Tensor task_loss(const torch::Tensor& out, const torch::Tensor& y, const LossSpec& spec = {},
                               bool sum = false) {
  namespace F = torch::nn::functional;
  auto o = out.to(torch::kFloat);
  if (spec.soft_targets && y.is_floating_point()) {
    auto per_sample = -(y * torch::log_softmax(o, -1)).sum(-1);
    return sum ? per_sample.sum() : per_sample.mean();
  }
  if (per_token(y)) {
    auto opt = F::CrossEntropyFuncOptions().label_smoothing(spec.label_smoothing).ignore_index(kIgnoreIndex);
    if (sum) opt = opt.reduction(torch::kSum);
    return F::cross_entropy(o.reshape({-1, o.size(-1)}), y.reshape(-1), opt);
  }
  const bool weighted = spec.class_weights.defined() && !sum;
  if (y.scalar_type() == torch::kLong) {
    auto opt = F::CrossEntropyFuncOptions().label_smoothing(spec.label_smoothing);
    if (sum) opt = opt.reduction(torch::kSum);
    if (weighted) opt = opt.weight(spec.class_weights.to(o.device()));
    return F::cross_entropy(o, y, opt);
  }
  o = o.reshape(y.sizes());
  torch::Tensor total;
  if (spec.kind == "bce") {
    auto opt = F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum);
    if (weighted) opt = opt.pos_weight(spec.class_weights.to(o.device()));
    total = F::binary_cross_entropy_with_logits(o, y, opt);
  } else if (spec.kind == "l1")
    total = F::l1_loss(o, y, F::L1LossFuncOptions().reduction(torch::kSum));
  else if (spec.kind == "huber")
    total = F::huber_loss(o, y, F::HuberLossFuncOptions().reduction(torch::kSum).delta(spec.huber_delta));
  else
    total = F::mse_loss(o, y, F::MSELossFuncOptions().reduction(torch::kSum));
  return sum ? total / (y.dim() > 1 ? y.size(1) : 1) : total / y.numel();
}

}  // namespace gputrain
