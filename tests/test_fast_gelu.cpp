// models/fast_gelu.h: GELU's tanh form on the CPU, against torch's own.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "models/fast_gelu.h"

using namespace gputrain;

namespace {

// The exact function and derivative, in double.
torch::Tensor gelu64(const torch::Tensor& x) {
  const auto u = 0.7978845608028654 * (x + 0.044715 * x.pow(3));
  return 0.5 * x * (1 + u.tanh());
}
torch::Tensor gelu64_grad(const torch::Tensor& x) {
  const auto t = (0.7978845608028654 * (x + 0.044715 * x.pow(3))).tanh();
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
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

TEST_CASE("fast gelu: other dtypes and a second derivative are torch's own, bit for bit", "[models]") {
  torch::manual_seed(1);
  const auto b = torch::randn({257}).to(torch::kBFloat16);
  CHECK(torch::equal(gelu_tanh(b), torch::gelu(b, "tanh")));
  // create_graph: the gradient is differentiable again (torch's gelu_backward), as with torch.
  const auto x = torch::randn({100}, torch::kDouble).to(torch::kFloat).requires_grad_();
  const auto dx = torch::autograd::grad({gelu_tanh(x).sum()}, {x}, {}, true, true)[0];
  const auto d2 = torch::autograd::grad({dx.sum()}, {x})[0];
  const auto y = x.detach().clone().requires_grad_();
  const auto dy = torch::autograd::grad({torch::gelu(y, "tanh").sum()}, {y}, {}, true, true)[0];
  CHECK(torch::equal(dx, dy));
  CHECK(torch::equal(d2, torch::autograd::grad({dy.sum()}, {y})[0]));
}
