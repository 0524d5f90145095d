// models/fast_gelu.h: GELU's tanh form on the CPU, against torch's own.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "models/fast_gelu.h"

using namespace gputrain;

namespace {

// The exact function and derivative, in double. 0.5 (1 + tanh(u)) as sigmoid(2u): for negative
// inputs 1 + tanh(u) cancels even in double (x = -8: it is 1e-21, far below double's 1e-16 steps).
torch::Tensor half_one_plus_tanh(const torch::Tensor& x) {
  return torch::sigmoid(2 * 0.7978845608028654 * (x + 0.044715 * x.pow(3)));
}
torch::Tensor gelu64(const torch::Tensor& x) { return x * half_one_plus_tanh(x); }
torch::Tensor gelu64_grad(const torch::Tensor& x) {
  const auto s = half_one_plus_tanh(x);
  return s + x * s * (1 - s) * 2 * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

}  // namespace

TEST_CASE("fast gelu: values and gradients as torch's gelu(approximate='tanh') within float rounding, "
          "any layout and length",
          "[models]") {
  torch::manual_seed(0);
  // Odd lengths leave a tail past every vector width; the columns of a transpose are strided.
  for (const auto& x0 : {torch::randn({1001}).mul(4), torch::randn({333, 129}).mul(3).t(),
                         torch::linspace(-30, 30, 60001), torch::tensor({0.0f, -0.0f, 1e-30f, -1e-30f, 87.f, -87.f,
                                                                         1e4f, -1e4f})}) {
    INFO(x0.sizes());
    const auto x = x0.clone().requires_grad_();
    const auto y = gelu_tanh(x);
    CHECK(y.sizes() == x.sizes());
    const auto x64 = x.detach().to(torch::kDouble);
    const auto want = gelu64(x64);
    // As close to the exact value as torch's float kernel is (a few ulps; an absolute floor for
    // the tail's near-zero values, where torch's 1 + tanh cancels).
    const auto ours = (y.detach().to(torch::kDouble) - want).abs();
    const auto torchs = (torch::gelu(x.detach(), "tanh").to(torch::kDouble) - want).abs();
    CHECK(ours.le(want.abs() * 5e-7 + 1e-7).all().item<bool>());
    CHECK(ours.max().item<double>() <= 2 * torchs.max().item<double>() + 1e-7);
    const auto g = torch::randn(x.sizes());
    y.backward(g);
    const auto dwant = g.to(torch::kDouble) * gelu64_grad(x64);
    const auto dours = (x.grad().to(torch::kDouble) - dwant).abs();
    CHECK(dours.le(dwant.abs() * 4e-6 + 1e-6).all().item<bool>());
  }
  // NaN passes through, as in torch.
  CHECK(gelu_tanh(torch::tensor({NAN})).isnan().item<bool>());
}

TEST_CASE("fast gelu: bf16 values and gradients within one bf16 step of the exact ones, as close as torch's",
          "[models]") {
  torch::manual_seed(2);
  // Values from -16 to 16 and an odd length (a tail past every vector width); NaN passes through.
  const auto x = torch::cat({torch::randn({4097}).mul(4), torch::tensor({NAN, 0.0f, -0.0f, 1e4f, -1e4f})})
                     .to(torch::kBFloat16)
                     .requires_grad_();
  const auto y = gelu_tanh(x);
  REQUIRE(y.scalar_type() == torch::kBFloat16);
  const auto g = torch::randn(x.sizes()).to(torch::kBFloat16);
  y.backward(g);
  const auto xt = x.detach().clone().requires_grad_();
  const auto yt = torch::gelu(xt, "tanh");
  yt.backward(g);
  const auto x64 = x.detach().to(torch::kDouble);
  const auto exact = gelu64(x64), dexact = g.to(torch::kDouble) * gelu64_grad(x64);
  // Computed in float and rounded once: within one bf16 step (2^-7 of the value at most) of the
  // exact value, and mostly the exact value correctly rounded. torch's kernel, the same in float
  // ulps but for its 1 + tanh, which cancels for negative inputs, is no closer.
  for (const auto& [ours, torchs, want] :
       {std::tuple{y.detach(), yt.detach(), exact}, std::tuple{x.grad(), xt.grad(), dexact}}) {
    CHECK(ours.isnan().equal(want.isnan()));
    const auto real = ~want.isnan();
    const auto w = want.masked_select(real), o = ours.to(torch::kDouble).masked_select(real);
    const auto err = (o - w).abs();
    CHECK(err.max().item<double>() <= (torchs.to(torch::kDouble).masked_select(real) - w).abs().max().item<double>());
    const double rounded = o.eq(w.to(torch::kBFloat16).to(torch::kDouble)).to(torch::kDouble).mean().item<double>();
    INFO("correctly rounded share " << rounded);
    CHECK(rounded > 0.98);
  }
}

TEST_CASE("fast gelu: other dtypes and a second derivative are torch's own, bit for bit", "[models]") {
  torch::manual_seed(1);
  const auto d = torch::randn({257}, torch::kDouble);
  CHECK(torch::equal(gelu_tanh(d), torch::gelu(d, "tanh")));
  // create_graph: the gradient is differentiable again (torch's gelu_backward), as with torch.
  const auto x = torch::randn({100}, torch::kDouble).to(torch::kFloat).requires_grad_();
  const auto dx = torch::autograd::grad({gelu_tanh(x).sum()}, {x}, {}, true, true)[0];
  const auto d2 = torch::autograd::grad({dx.sum()}, {x})[0];
  const auto y = x.detach().clone().requires_grad_();
  const auto dy = torch::autograd::grad({torch::gelu(y, "tanh").sum()}, {y}, {}, true, true)[0];
  CHECK(torch::equal(dx, dy));
  CHECK(torch::equal(d2, torch::autograd::grad({dy.sum()}, {y})[0]));
}
