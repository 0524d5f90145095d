// A text a language model writes: ids drawn one at a time from its next-token distribution, as
// llm.c and nanoGPT print during training (--sample_every).
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "core/precision.h"
#include "models/registry.h"

namespace gputrain {

struct SampleOptions {
  int64_t start = 0;      // the first id, given (an end-of-text token: a text from nothing)
  int64_t tokens = 64;    // ids drawn after it
  int64_t context = 0;    // the model's positions: the last this many ids are its input
  uint64_t seed = 0;      // the draw's generator: the same seed, weights and precision give the same text
  Precision precision;    // the run's autocast
};

// The drawn ids (without `start`). Temperature 1 and no top-k: the model's own distribution,
// as llm.c samples. No key-value cache: each id is a forward over the context so far, which a
// training-time sample of tens of tokens can afford. The model is left in training mode.
std::vector<int64_t> sample_tokens(Net& model, torch::Device device, const SampleOptions& o);

}  // namespace gputrain
