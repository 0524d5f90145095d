// Text from a language model with a key-value cache (`gputrain generate`): one pass over the
// prompts fills the cache, then each new token is a pass over that token alone.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "core/precision.h"
#include "models/registry.h"

namespace gputrain {

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  double temperature = 1.0;  // 0: greedy (the likeliest id, the first of equals)
  int64_t top_k = 0;         // keep the k likeliest ids (0: all)
  double top_p = 1.0;        // keep the fewest likeliest ids whose probability reaches p (1: all)
  uint64_t seed = 0;         // the draw's generator, on the CPU: the same seed gives the same text on any device
  std::vector<int64_t> end_of_text;  // a row stops after drawing one of these ids
  int64_t context = 0;       // the model's positions: the prompt and the new ids but the last fit in them
  Precision precision;       // the run's autocast
};

enum class GenerationEnd { kEndOfText, kStopString, kMaxTokens, kContext };
const char* generation_end_name(GenerationEnd r);

struct Generation {
  std::vector<int64_t> ids;  // the new ids, the end-of-text id included when it stopped the row
  GenerationEnd stop = GenerationEnd::kMaxTokens;
};

struct GenerateTimes {
  double first_token_s = 0;  // from the start to every row's first new id: the prompts' pass
  double decode_s = 0;       // the rest
  int64_t decoded = 0;       // ids drawn after each row's first (those of running rows)
};

// New ids for each prompt (none empty), batched: shorter prompts are padded on the left.
// `on_token(row, id)` sees each id as it is drawn and returns false to stop that row (a stop
// string); it is not called for the end-of-text id. The model is left in eval mode.
std::vector<Generation> generate(Net& model, torch::Device device, const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerateOptions& o, const std::function<bool(size_t, int64_t)>& on_token,
                                 GenerateTimes* times = nullptr);

// The next id of each row from its logits [rows, vocabulary] (float, on the CPU): temperature,
// then top-k, then top-p, then a draw (or the arg-max at temperature 0), as Hugging Face's
// sampling orders them.
torch::Tensor next_ids(torch::Tensor logits, const GenerateOptions& o, at::Generator& gen);

}  // namespace gputrain
