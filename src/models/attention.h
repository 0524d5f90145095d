// Self-attention for the language-model families (gpt, llama): ATen's fused
// scaled_dot_product_attention, with one exception. On CPUs under bf16 autocast, ATen's bf16
// flash kernel can be slower than its fp32 one: at the small GPT's shape (16 x 4 heads x 256 x
// 32) on a 2-core Xeon with AMX, a forward and backward took 29-31 ms in bf16 and 17-19 ms in
// fp32 (casts included), while at GPT-2's (12 heads x 1024 x 64) bf16 was 1.7x faster. So the
// run decides (--attention_precision; auto: timed at its own shape when the session starts),
// and where fp32 wins the queries, keys and values are widened, attended in fp32 and the result
// narrowed back: more precise than bf16, never less.
#pragma once
#include <optional>
#include <string>

#include <torch/types.h>

namespace gputrain {

// at::scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, scale = default, gqa),
// in fp32 when the switch below is on and the inputs are bf16 on the CPU.
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const std::optional<torch::Tensor>& mask, double dropout_p, bool is_causal,
                        bool enable_gqa = false);

// The process-wide switch (a numerics setting, as TF32 is), set by the session's decision.
void set_cpu_attention_fp32(bool on);

// The kernel ATen picks for causal self-attention of this shape, dtype and device
// (at::_fused_sdp_choice): "flash", "memory-efficient", "cuDNN" or "math".
std::string attention_kernel(int64_t heads, int64_t tokens, int64_t head_size, torch::ScalarType dtype,
                             torch::Device device, double dropout_p);

// Milliseconds of one causal forward and backward at [batch, heads, tokens, head_size], inputs
// laid out as a fused qkv projection gives them, in bf16 and through the fp32 path: the best
// of 3 alternating rounds after one warm-up each.
struct AttentionTiming {
  double bf16_ms = 0, fp32_ms = 0;
};
AttentionTiming time_cpu_attention(int64_t batch, int64_t heads, int64_t tokens, int64_t head_size);

}  // namespace gputrain
