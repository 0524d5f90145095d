// A per-token cross-entropy fused with the linear head before it, computed a chunk of tokens at
// a time: a language model's [tokens, vocabulary] logits, and their gradient, are never held
// whole. At GPT-2 124M with 16 x 1024 tokens a micro-batch those are 3.3 GB in fp32 each (and
// the bf16 copy autocast makes); here one chunk's are (kHeadChunkElements), plus the head's
// gradient and the hidden states' gradient, which the fused forward computes as it goes.
#pragma once
#include <functional>

#include <torch/types.h>

#include "models/registry.h"
#include "step/loss.h"

namespace gputrain {

// What a forward hands the loss: the model's output, or, for a model with a linear head when
// the loss fuses it (Net::forward_head), the head's input and weight.
struct ForwardOutput {
  torch::Tensor out;
  HeadInput head;
};

// The forward the loss needs: the head's input when `fuse_head` and the model has one, else
// the output.
ForwardOutput forward_for_loss(Net& model, const Batch& b, bool fuse_head);

// task_loss (step/loss.h) of either kind of output: for a head, the per-token cross-entropy in
// chunks (a head's target is a class per token); with autograd on, the gradients of the hidden
// states and the head's weight are computed chunk by chunk in the forward and handed to the
// backward.
torch::Tensor output_loss(const ForwardOutput& o, const torch::Tensor& y, const LossSpec& spec, bool sum = false);

// Logits per chunk: 2^25 elements (128 MiB in float32). GPT-2's 50,257 words make that 667
// tokens, whose matrix product with the head still fills a GPU; a small vocabulary (bytes: 257)
// takes a whole micro-batch in one chunk.
inline constexpr int64_t kHeadChunkElements = int64_t{1} << 25;

// The summed cross-entropy of linear(head.hidden, head.weight) against y (a class per token,
// kIgnoreIndex not counted), chunk by chunk.
torch::Tensor head_cross_entropy(const HeadInput& head, const torch::Tensor& y, double label_smoothing,
                                 int64_t chunk_elements = kHeadChunkElements);

// Evaluation through a head: `each` sees the logits (float32, [1, tokens, classes]) and targets
// ([1, tokens]) of one chunk of tokens at a time, as one sample of those tokens.
void for_each_logits_chunk(const HeadInput& head, const torch::Tensor& y,
                           const std::function<void(const torch::Tensor& logits, const torch::Tensor& y)>& each,
                           int64_t chunk_elements = kHeadChunkElements);

}  // namespace gputrain
