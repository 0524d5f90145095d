// LoRA (Hu et al., 2021): a frozen projection W learns through a low-rank update, y = x W^T +
// (alpha / r) x A^T B^T, with A [r, in] and B [out, r]. B starts at zero, so training starts from
// the pretrained model; `export` folds the update into W (merge_lora), so the exported model is
// the plain architecture that Hugging Face loads.
//
// The gpt and llama blocks build their projections as `Projection`s, which compute as
// torch::nn::Linear does (same parameter names and layouts) until add_lora gives them adapters.
// For decoding on a CPU, pack_for_decoding lays their weights out for oneDNN's small-batch
// matrix products (what torch.compile's CPU freezing does); unpack_after_decoding drops that.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace gputrain {

class ProjectionImpl : public torch::nn::Module {
 public:
  // `lora_target`: whether add_lora adapts it (a language model's head is not adapted).
  ProjectionImpl(int64_t in, int64_t out, bool bias, bool lora_target = true);
  torch::Tensor forward(const torch::Tensor& x);
  // Registers lora_A (PEFT's init: Kaiming-uniform, as nn.Linear's weight) and lora_B (zeros).
  void add_lora(int64_t rank, double scale);

  torch::Tensor weight, bias, lora_A, lora_B;
  torch::Tensor packed;  // oneDNN's layout of weight, while decoding on a CPU; else undefined
  double lora_scale = 0;
  bool lora_target = true;
};
TORCH_MODULE(Projection);

// Packs the weights of every Projection of `model` for products of about `rows` rows, when the
// model is on a CPU in float32 or bfloat16 and oneDNN is there; returns how many were packed.
// The forward is the same product (float32: to about 1e-6 of its size, another summation order).
int64_t pack_for_decoding(torch::nn::Module& model, int64_t rows);
void unpack_after_decoding(torch::nn::Module& model);

// Gives every Projection of `model` an adapter of rank `rank` scaled by alpha / rank; returns
// the names of the parameters that are not adapters (to be frozen). None found: a logic error.
std::vector<std::string> add_lora(torch::nn::Module& model, int64_t rank, double alpha);

// Whether parameter `name` belongs to an adapter.
bool is_lora_parameter(const std::string& name);

// `tensors` (a checkpoint's) with each X.lora_A / X.lora_B pair folded into X.weight
// (W + scale B A, in W's dtype) and removed. Returns how many were merged.
int64_t merge_lora(std::vector<std::pair<std::string, torch::Tensor>>& tensors, double scale);

}  // namespace gputrain
