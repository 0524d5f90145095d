// Labels one position on, for a causal language model whose data keeps them as Hugging Face
// does: labels equal to the input ids (with -100 where nothing is trained), the model shifting
// them itself when it computes its loss. gputrain computes the loss outside the model, so the
// data shifts them: position t's label becomes the token at t + 1, and the last position's is
// -100 (it has no next token).
#pragma once
#include "data/dataset.h"

namespace gputrain {

// `base` with its target field shifted in every sample. A usage error when the target is not
// per-token class ids (an i64 field of one varying or fixed dimension).
DatasetPtr shift_labels(DatasetPtr base);

}  // namespace gputrain
