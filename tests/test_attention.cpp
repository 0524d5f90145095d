// models/attention.h: ATen's attention, and on the CPU under bf16 autocast its fp32 kernel when
// the run decides so.
#include <catch2/catch.hpp>

#include <cmath>

#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/torch.h>

#include "core/autocast.h"
#include "models/attention.h"

using namespace gputrain;

namespace {

struct Switch {  // the process-wide switch, put back after each case
  explicit Switch(bool on) { set_cpu_attention_fp32(on); }
  ~Switch() { set_cpu_attention_fp32(false); }
};

// q, k, v as gpt lays them out (column blocks of one [B, T, 3d] projection, viewed as heads),
// attended under bf16 autocast; the output and the projection's gradient.
std::pair<torch::Tensor, torch::Tensor> attend(const torch::Tensor& qkv0, const std::optional<torch::Tensor>& mask) {
  const int64_t B = qkv0.size(0), T = qkv0.size(1), d = qkv0.size(2) / 3, H = 2;
  const auto qkv = qkv0.detach().clone().requires_grad_();
  torch::Tensor y;
  {
    AutocastGuard autocast(true, torch::kCPU, torch::kBFloat16);
    const auto parts = qkv.split(d, 2);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, H, d / H}).transpose(1, 2); };
    y = attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), mask, 0.0, !mask.has_value());
  }
  y.backward(torch::ones_like(y));
  return {y.detach(), qkv.grad()};
}

// The same, by hand: ATen's kernel in `dtype` on the inputs widened (or not), the result in bf16.
std::pair<torch::Tensor, torch::Tensor> reference(const torch::Tensor& qkv0, const std::optional<torch::Tensor>& mask,
                                                  torch::ScalarType dtype) {
  const int64_t B = qkv0.size(0), T = qkv0.size(1), d = qkv0.size(2) / 3, H = 2;
  const auto qkv = qkv0.detach().clone().requires_grad_();
  const auto parts = qkv.to(dtype).split(d, 2);
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, H, d / H}).transpose(1, 2); };
  const auto y =
      at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), mask, 0.0, !mask.has_value())
          .to(torch::kBFloat16);
  y.backward(torch::ones_like(y));
  return {y.detach(), qkv.grad()};
}

}  // namespace

TEST_CASE("attention: under CPU bf16 autocast the fp32 switch runs ATen's fp32 kernel on widened inputs and "
          "off its bf16 kernel, bit for bit, the fp32 one closer to float64",
          "[models]") {
  torch::manual_seed(0);
  // The bf16 projection output autocast gives attention; a causal case and a boolean mask.
  const auto qkv = torch::randn({2, 37, 3 * 16}).to(torch::kBFloat16);
  const auto mask = torch::rand({2, 1, 37, 37}).lt(0.7).logical_or(torch::eye(37, torch::kBool));
  for (const auto& m : {std::optional<torch::Tensor>(), std::optional<torch::Tensor>(mask)}) {
    INFO((m ? "mask" : "causal"));
    std::pair<torch::Tensor, torch::Tensor> off, on;
    {
      Switch s(false);
      off = attend(qkv, m);
    }
    {
      Switch s(true);
      on = attend(qkv, m);
    }
    REQUIRE(on.first.scalar_type() == torch::kBFloat16);
    REQUIRE(on.second.scalar_type() == torch::kBFloat16);
    const auto bf16 = reference(qkv, m, torch::kBFloat16), fp32 = reference(qkv, m, torch::kFloat);
    CHECK(torch::equal(off.first, bf16.first));
    CHECK(torch::equal(off.second, bf16.second));
    CHECK(torch::equal(on.first, fp32.first));
    CHECK(torch::equal(on.second, fp32.second));
    // More precise, never less: the output's error against float64 attention.
    const auto truth = [&] {
      const int64_t B = 2, T = 37, d = 16, H = 2;
      const auto parts = qkv.to(torch::kDouble).split(d, 2);
      auto heads = [&](const torch::Tensor& t) { return t.view({B, T, H, d / H}).transpose(1, 2); };
      return at::scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), m, 0.0, !m.has_value());
    }();
    const double err_fp32 = (on.first.to(torch::kDouble) - truth).abs().max().item<double>();
    const double err_bf16 = (off.first.to(torch::kDouble) - truth).abs().max().item<double>();
    INFO("fp32 path " << err_fp32 << ", bf16 kernel " << err_bf16);
    CHECK(err_fp32 <= err_bf16);
  }
}

TEST_CASE("attention: the switch leaves float inputs and no autocast alone, and the timing gives both figures",
          "[models]") {
  Switch s(true);
  torch::manual_seed(1);
  const auto q = torch::randn({1, 2, 5, 4}), k = torch::randn({1, 2, 5, 4}), v = torch::randn({1, 2, 5, 4});
  CHECK(torch::equal(attention(q, k, v, std::nullopt, 0.0, true), at::scaled_dot_product_attention(q, k, v, {}, 0.0, true)));
  const auto t = time_cpu_attention(2, 2, 16, 8);
  CHECK(t.bf16_ms > 0);
  CHECK(t.fp32_ms > 0);
  CHECK(std::isfinite(t.bf16_ms + t.fp32_ms));
}
