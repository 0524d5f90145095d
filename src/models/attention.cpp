#include "models/attention.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>

#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/autograd.h>

namespace gputrain {
namespace {

std::atomic<bool> g_cpu_fp32{false};

torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                   const std::optional<torch::Tensor>& mask, double dropout_p, bool is_causal, bool enable_gqa) {
  return at::scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, std::nullopt, enable_gqa);
}

// Widened inputs, ATen's fp32 kernel (autocast would narrow them again: it is held off for this
// one call), the result narrowed to the inputs' dtype. A float mask is widened too.
torch::Tensor in_fp32(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      const std::optional<torch::Tensor>& mask, double dropout_p, bool is_causal, bool enable_gqa) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  std::optional<torch::Tensor> m = mask;
  if (m && m->is_floating_point()) m = m->to(torch::kFloat);
  return sdpa(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), m, dropout_p, is_causal, enable_gqa)
      .to(q.scalar_type());
}

}  // namespace

void set_cpu_attention_fp32(bool on) { g_cpu_fp32 = on; }

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const std::optional<torch::Tensor>& mask, double dropout_p, bool is_causal, bool enable_gqa) {
  if (g_cpu_fp32 && q.is_cpu() && q.scalar_type() == torch::kBFloat16)
    return in_fp32(q, k, v, mask, dropout_p, is_causal, enable_gqa);
  return sdpa(q, k, v, mask, dropout_p, is_causal, enable_gqa);
}

std::string attention_kernel(int64_t heads, int64_t tokens, int64_t head_size, torch::ScalarType dtype,
                             torch::Device device, double dropout_p) {
  const auto q = torch::empty({1, heads, tokens, head_size}, torch::TensorOptions().dtype(dtype).device(device));
  // sdp::SDPBackend's values.
  switch (at::_fused_sdp_choice(q, q, q, std::nullopt, dropout_p, /*is_causal=*/true)) {
    case 0: return "math";
    case 1: return "flash";
    case 2: return "memory-efficient";
    case 3: return "cuDNN";
    default: return "other";
  }
}

AttentionTiming time_cpu_attention(int64_t batch, int64_t heads, int64_t tokens, int64_t head_size) {
  torch::AutoGradMode grad(true);
  const int64_t d = heads * head_size;
  const auto qkv = torch::randn({batch, tokens, 3 * d}).to(torch::kBFloat16).requires_grad_();
  const auto ones = torch::ones({batch, heads, tokens, head_size}, torch::kBFloat16);
  auto run = [&](bool fp32) {
    const auto start = std::chrono::steady_clock::now();
    const auto parts = qkv.split(d, 2);
    std::vector<torch::Tensor> qkv_heads;
    for (const auto& p : parts) qkv_heads.push_back(p.view({batch, tokens, heads, head_size}).transpose(1, 2));
    const auto y = fp32 ? in_fp32(qkv_heads[0], qkv_heads[1], qkv_heads[2], std::nullopt, 0.0, true, false)
                        : sdpa(qkv_heads[0], qkv_heads[1], qkv_heads[2], std::nullopt, 0.0, true, false);
    y.backward(ones);
    qkv.mutable_grad().reset();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  run(false), run(true);  // warm-up: first-call allocations and kernel set-up
  AttentionTiming t{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  for (int round = 0; round < 3; ++round) {
    t.bf16_ms = std::min(t.bf16_ms, run(false));
    t.fp32_ms = std::min(t.fp32_ms, run(true));
  }
  return t;
}

}  // namespace gputrain
