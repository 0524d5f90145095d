// llama (models/llama.cpp): its defaults, which the session decides and records.
#pragma once
#include <cstdint>

namespace gputrain {

// The MLP's inner width for a model of `width`: Llama's rule, 8/3 x width rounded up to 256.
int64_t llama_mlp_width(int64_t width);

// Hugging Face's LlamaConfig defaults for rope_theta; RMSNorm's epsilon as Llama 2 and 3 ship it.
constexpr double kLlamaRopeTheta = 10000.0;
constexpr double kLlamaNormEps = 1e-5;

}  // namespace gputrain
