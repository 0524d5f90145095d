// Packed examples: a window of token ids that holds several examples, each behind an end-of-text
// token (tools/prepare_text.py --instructions, data/token_dataset.h). The batch's `positions`
// field restarts at 0 where an example starts; the language models count their positions from
// it, and a token attends to the earlier tokens of its own example only, so that each example
// gives the logits it would give alone.
#pragma once
#include <torch/types.h>

#include "data/batch.h"

namespace gputrain {

struct Documents {
  torch::Tensor positions;  // [B, T], or [1, T] (0..T-1) for a batch without the field
  torch::Tensor mask;       // [B, 1, T, T] bool (true: may attend); undefined: plain causal
};

// The positions and attention mask of the token ids `ids` [B, T] in batch `b`.
Documents documents_of(const Batch& b, const torch::Tensor& ids);

}  // namespace gputrain
