// Dropout on the CPU with a counter-based generator: each element's keep/drop comes from a hash
// of (a seed drawn once per call from the default CPU generator, its index), computed in parallel
// chunks, and the kept values scaled by 1 / (1 - p) in the same pass. ATen's CPU dropout draws
// a Bernoulli per element from a sequential generator: 30 ms for 2M values on this project's
// 2-core machine (a BERT-base attention's probabilities), 15% of a BERT step; this takes ~1 ms.
// The masks are as random (the same keep probability, independent per element) but not PyTorch's
// own; a run is reproducible from --seed as before. On other devices ATen's dropout runs (CUDA's
// is counter-based already).
#pragma once
#include <torch/types.h>

namespace gputrain {

// dropout(x, p, train) as torch.nn.functional.dropout computes it, differentiable in x.
torch::Tensor fast_dropout(const torch::Tensor& x, double p, bool train);

// scaled_dot_product_attention with dropout_p > 0 on the CPU: ATen runs its math form then
// (no fused kernel drops out), its dropout the slow one; this is that math form, step for step
// (scaled query and key, the mask added, _safe_softmax, dropout, the product with the values),
// with fast_dropout. Other calls (no dropout, another device) go to ATen's own.
torch::Tensor attention_with_dropout(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const std::optional<torch::Tensor>& mask, double p, bool is_causal,
                                     std::optional<double> scale, bool gqa);

}  // namespace gputrain
