// Hugging Face Llama folders (what LlamaForCausalLM.save_pretrained writes and from_pretrained
// reads): config.json for the shape, model.safetensors or a sharded model.safetensors.index.json
// for the weights. gputrain's llama keeps Hugging Face's names and layouts.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "weights/hf_gpt2.h"

namespace gputrain {

struct LlamaShape {
  GptShape base;  // vocab_size, max_position_embeddings, hidden_size, num_hidden_layers, num_attention_heads
  int64_t kv_heads = 0, mlp_width = 0;
  double rope_theta = 10000, norm_eps = 1e-6;
  std::vector<double> rope_scaling;  // empty, or Llama 3's factor, low_freq_factor, high_freq_factor, original positions
  bool tied = false;
};

// DIR/config.json as a Llama shape. Exit 2 naming the file for another model type, or a variant
// gputrain's llama does not compute (biases, another activation, a head width other than
// hidden / heads, a rope_scaling other than Llama 3's).
LlamaShape read_hf_llama_config(const std::string& dir);

// DIR's weights (model.safetensors, the files a model.safetensors.index.json names, or
// pytorch_model.bin) in float32; a tied lm_head.weight is checked against the embedding and
// dropped. Exit 2 naming the folder when a tensor is missing, unknown or of another shape than
// config.json implies.
std::vector<std::pair<std::string, torch::Tensor>> read_hf_llama_weights(const std::string& dir, const LlamaShape& shape);

// Writes DIR for LlamaForCausalLM.from_pretrained: config.json, model.safetensors (no lm_head
// when tied: from_pretrained ties it) and a copy of `tokenizer` ("" for none), whose end-of-text
// token becomes bos and eos. Each file atomically.
void write_hf_llama(const std::string& dir, const std::vector<std::pair<std::string, torch::Tensor>>& weights,
                    const LlamaShape& shape, const std::string& tokenizer);

}  // namespace gputrain
