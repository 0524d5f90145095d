// Hugging Face GPT-2 folders (what GPT2LMHeadModel.save_pretrained writes and from_pretrained
// reads): config.json for the shape, model.safetensors (or pytorch_model.bin) for the weights.
// gputrain's gpt keeps nanoGPT's names with nn.Linear weights [out, in]; Hugging Face's Conv1D
// stores the same weights [in, out].
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

namespace gputrain {

struct GptShape {
  int64_t vocab = 0, positions = 0, width = 0, depth = 0, heads = 0;
};

// Whether `path` is a folder holding a Hugging Face model (a config.json).
bool is_hf_folder(const std::string& path);
// DIR/config.json's model_type ("gpt2", "llama"; "" when it has none).
std::string hf_model_type(const std::string& dir);
// The dtype a folder's config.json gives its weights ("float32", "bfloat16", "float16"):
// float32 when it names none, as transformers' from_pretrained then loads.
std::string hf_dtype(const std::string& dir);
// Creates folder `dir` (--out) for a model's files; a usage error when it cannot be one.
void make_hf_folder(const std::string& dir);
// The JSON file `path`; one usage error naming it (with `hint`) when unreadable or not JSON.
nlohmann::json read_hf_json(const std::string& path, const std::string& hint);

// DIR/config.json as a GPT-2 shape. Exit 2 naming the file for another model type, or a GPT-2
// variant gputrain's gpt does not compute (untied head, another activation or epsilon, an inner
// width other than 4 x n_embd, scaled or reordered attention).
GptShape read_hf_gpt2_config(const std::string& dir);

// DIR's weights in gputrain's names and layouts: Conv1D weights transposed, GPT2Model's names
// given the "transformer." prefix, the attention-mask buffers of old files dropped, lm_head
// dropped (the head is wte), the token embedding padded with zero rows to `padded_vocab`. Exit 2
// naming the folder when a tensor's shape disagrees with config.json, or one is missing.
std::vector<std::pair<std::string, torch::Tensor>> read_hf_gpt2_weights(const std::string& dir, const GptShape& shape,
                                                                      int64_t padded_vocab);

// Writes DIR for GPT2LMHeadModel.from_pretrained: config.json, and model.safetensors from
// gputrain's gpt `weights` (wte cut to shape.vocab rows, Conv1D layouts, lm_head.weight written
// beside transformer.wte.weight since safetensors cannot alias), and a copy of `tokenizer` (a
// tokenizer.json; "" for none), whose <|endoftext|> becomes bos/eos. Each file atomically.
void write_hf_gpt2(const std::string& dir, const std::vector<std::pair<std::string, torch::Tensor>>& weights,
                   const GptShape& shape, const std::string& tokenizer);

}  // namespace gputrain
