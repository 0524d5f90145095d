// models/fast_dropout.h: the CPU dropout a program's graph runs, and attention's math form with it.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "models/fast_dropout.h"

using namespace gputrain;

TEST_CASE("fast dropout: keeps 1 - p of the values, scaled by 1 / (1 - p), the backward through the same mask, "
          "reproducible from the seed",
          "[models]") {
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    INFO(c10::toString(dtype));
    torch::manual_seed(3);
    auto x = torch::rand({64, 1001}).add(0.5).to(dtype).requires_grad_();
    const double p = 0.3;
    auto y = fast_dropout(x, p, true);
    const auto kept = y.ne(0);
    const double share = kept.to(torch::kDouble).mean().item<double>();
    CHECK(share == Approx(1 - p).margin(0.01));  // 64,064 draws: the standard deviation is 0.0018
    // Kept values are x / (1 - p), rounded once in x's dtype.
    const auto want = (x.detach().to(torch::kFloat) * (1 / (1 - p))).to(dtype);  // as ATen scales
    CHECK(torch::equal(y.detach().masked_select(kept), want.masked_select(kept)));
    y.sum().backward();
    CHECK(torch::equal(x.grad().ne(0), kept));
    // Rows of the flat index do not repeat one pattern (each element's draw is its own).
    CHECK(!torch::equal(kept[0], kept[1]));
    torch::manual_seed(3);
    auto again = fast_dropout(torch::rand({64, 1001}).add(0.5).to(dtype), p, true);
    CHECK(torch::equal(again.ne(0), kept));
  }
  auto x = torch::randn({8});
  CHECK(torch::equal(fast_dropout(x, 0.5, false), x));  // eval: the identity
}

TEST_CASE("fast dropout: attention's math form equals ATen's scaled_dot_product_attention, its masks and grouped "
          "heads, in values and gradients",
          "[models]") {
  torch::manual_seed(0);
  const auto q = torch::randn({2, 4, 5, 8}, torch::requires_grad());
  const auto kv = torch::randn({2, 2, 7, 8}), vv = torch::randn({2, 2, 7, 8});
  const auto k4 = kv.repeat_interleave(2, 1).requires_grad_(), v4 = vv.repeat_interleave(2, 1).requires_grad_();
  const auto allowed = torch::rand({2, 1, 5, 7}).gt(0.3).logical_or(torch::eye(5, 7, torch::kBool));
  const auto additive = torch::randn({2, 1, 5, 7});
  struct Case {
    const char* name;
    std::optional<torch::Tensor> mask;
    bool causal, gqa;
  };
  for (const auto& c : {Case{"no mask", std::nullopt, false, false}, Case{"bool mask", allowed, false, false},
                        Case{"float mask", additive, false, false}, Case{"causal", std::nullopt, true, false},
                        Case{"grouped", allowed, false, true}}) {
    INFO(c.name);
    const auto k = c.gqa ? kv.clone().requires_grad_() : k4, v = c.gqa ? vv.clone().requires_grad_() : v4;
    // p so small that no value is dropped: the rest of the math is compared.
    auto ours = attention_with_dropout(q, k, v, c.mask, 1e-12, c.causal, 0.3, c.gqa);
    auto aten = at::scaled_dot_product_attention(q, k, v, c.mask, 0.0, c.causal, 0.3, c.gqa);
    CHECK(torch::allclose(ours, aten, 1e-5, 1e-6));
    const auto grads = [&](const torch::Tensor& out) {
      return torch::autograd::grad({out.pow(2).sum()}, {q, k, v});
    };
    const auto g1 = grads(ours), g2 = grads(aten);
    for (size_t i = 0; i < g1.size(); ++i) CHECK(torch::allclose(g1[i], g2[i], 1e-4, 1e-5));
  }
}
