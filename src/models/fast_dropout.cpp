#include "models/fast_dropout.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

namespace gputrain {
namespace {

// splitmix64's finalizer: a bijective mix whose outputs pass BigCrush for consecutive inputs.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// out = x / (1 - p) where kept, else 0, and the mask of the kept ones. Element i's draw is the
// i-th 32-bit half of mix(seed + (i / 2) * the golden ratio), kept when below (1 - p) * 2^32.
// The scaling is computed in float and rounded once, as ATen's x * mask * scale is.
template <typename T>
void dropout_kernel(const T* x, T* out, bool* mask, int64_t n, uint64_t seed, double p) {
  const uint64_t keep_below = static_cast<uint64_t>((1.0 - p) * 4294967296.0);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  // Pairs of elements per hash; chunks of 2^14 pairs keep each thread's share large.
  at::parallel_for(0, (n + 1) / 2, int64_t{1} << 14, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const uint64_t h = mix(seed + static_cast<uint64_t>(j) * 0x9E3779B97F4A7C15ull);
      for (int64_t i = 2 * j, half = 0; half < 2 && i < n; ++i, ++half) {
        const bool keep = ((half == 0 ? h : h >> 32) & 0xFFFFFFFFull) < keep_below;
        mask[i] = keep;
        out[i] = keep ? static_cast<T>(static_cast<float>(x[i]) * scale) : static_cast<T>(0.0f);
      }
    }
  });
}

uint64_t draw_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

class FastDropout : public torch::autograd::Function<FastDropout> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, double p) {
    const auto in = x.contiguous();
    auto out = torch::empty_like(in);
    auto mask = torch::empty(in.sizes(), in.options().dtype(torch::kBool));
    const uint64_t seed = draw_seed();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, in.scalar_type(), "fast_dropout", [&] {
      dropout_kernel<scalar_t>(in.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), mask.data_ptr<bool>(), in.numel(), seed, p);
    });
    ctx->save_for_backward({mask});
    ctx->saved_data["scale"] = 1.0 / (1.0 - p);
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto mask = ctx->get_saved_variables()[0];
    return {grad[0].mul(mask).mul_(ctx->saved_data["scale"].toDouble()), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor attention_with_dropout(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const std::optional<torch::Tensor>& mask, double p, bool is_causal,
                                     std::optional<double> scale, bool gqa) {
  // ATen's own for what it does as fast, or refuses: no dropout, another device, p >= 1, a causal
  // flag with a mask, a negative scale, double precision.
  if (p <= 0.0 || p >= 1.0 || !q.device().is_cpu() || (is_causal && mask && mask->defined()) || (scale && *scale < 0) ||
      q.scalar_type() == torch::kDouble)
    return at::scaled_dot_product_attention(q, k, v, mask, p, is_causal, scale, gqa);
  const int64_t L = q.size(-2), S = k.size(-2);
  const double root = std::sqrt(scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  torch::Tensor key = k, value = v;
  if (gqa && k.dim() >= 3 && q.size(-3) != k.size(-3)) {  // grouped keys and values: each serves q.size(-3) / k.size(-3) heads
    key = k.repeat_interleave(q.size(-3) / k.size(-3), -3);
    value = v.repeat_interleave(q.size(-3) / k.size(-3), -3);
  }
  auto scores = at::matmul(q * root, (key * root).transpose(-2, -1));
  // A boolean mask (true: attend) becomes 0 / -inf, as ATen converts it.
  const auto additive = [&](const torch::Tensor& allowed) {
    return torch::zeros_like(allowed, scores.options()).masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  };
  // Added in the scores' dtype, as ATen's math form adds in place.
  if (is_causal) scores = scores + additive(torch::ones({L, S}, q.options().dtype(torch::kBool)).tril());
  if (mask && mask->defined())
    scores = scores + (mask->scalar_type() == torch::kBool ? additive(*mask) : mask->to(scores.scalar_type()));
  auto weights = at::_safe_softmax(scores, -1);
  return at::matmul(FastDropout::apply(weights, p), value);
}

torch::Tensor fast_dropout(const torch::Tensor& x, double p, bool train) {
  // ATen's own for eval, p outside (0, 1) (it refuses p < 0, zeroes at p = 1), double precision
  // (the kernel scales in float) and other devices.
  if (!train || p <= 0.0 || p >= 1.0 || !x.device().is_cpu() || !x.is_floating_point() || x.scalar_type() == torch::kDouble)
    return at::dropout(x, p, train);
  return FastDropout::apply(x, p);
}

}  // namespace gputrain
