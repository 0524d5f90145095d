#include "models/fast_gelu.h"

#include <cstdint>

#include <ATen/Parallel.h>
#include <torch/autograd.h>

namespace gputrain {
namespace {

// Each loop is built three times (x86-64-v4: AVX-512, v3: AVX2 + FMA, and the baseline) and the
// loader picks the best the CPU runs (GCC's function multiversioning, glibc's ifunc). Other
// compilers and CPUs build each loop once, for the target.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GPUTRAIN_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GPUTRAIN_CPU_CLONES
#endif

// e^x for x in [-87, 87], clamped outside (1 / (1 + e^87) is still a normal float: no subnormal
// slows the loop, and a sigmoid of 1e-38 or of 1 - 1e-38 changes no product here). Cephes'
// expf: x / ln 2 rounded to n, a degree-6 polynomial on the remainder, times 2^n; within 2 ulps.
// Branch-free, so that the loops vectorize.
inline float exp_clamped(float x) {
  x = x < -87.0f ? -87.0f : (x > 87.0f ? 87.0f : x);
  // Adding 1.5 x 2^23 rounds x / ln 2 to an integer n, held in t's low mantissa bits.
  const float t = x * 1.44269504088896341f + 12582912.0f;
  const float n = t - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // x - n ln 2, ln 2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t two_to_n = (__builtin_bit_cast(int32_t, t) - 0x4B400000 + 127) << 23;
  return p * __builtin_bit_cast(float, two_to_n);
}

// GELU(x) = 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3); 0.5 (1 + tanh(u)) is
// sigmoid(2u). kTwoBeta is 2 sqrt(2 / pi).
constexpr float kTwoBeta = 1.5957691216057308f, kKappa = 0.044715f;

inline float sigmoid_2u(float v) { return 1.0f / (1.0f + exp_clamped(-kTwoBeta * (v + kKappa * v * v * v))); }

// bf16 is float's upper half: widened exactly, and narrowed with rounding to the nearest even
// (NaN stays a quiet NaN), as c10::BFloat16 and ATen's vector kernels do.
inline float widen(float v) { return v; }
inline float widen(uint16_t v) { return __builtin_bit_cast(float, static_cast<uint32_t>(v) << 16); }
inline float narrow(float v, float*) { return v; }
inline uint16_t narrow(float v, uint16_t*) {
  const uint32_t b = __builtin_bit_cast(uint32_t, v);
  const auto rounded = static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
  return v != v ? uint16_t{0x7FC0} : rounded;
}

template <typename T>
inline void forward_loop(const T* __restrict x, T* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = widen(x[i]);
    y[i] = narrow(v * sigmoid_2u(v), y);
  }
}

// d/dx [x s(x)] = s + x s (1 - s) 2 du/dx, du/dx = sqrt(2 / pi) (1 + 3 0.044715 x^2).
template <typename T>
inline void backward_loop(const T* __restrict grad, const T* __restrict x, T* __restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = widen(x[i]), s = sigmoid_2u(v);
    dx[i] = narrow(widen(grad[i]) * (s + v * s * (1.0f - s) * kTwoBeta * (1.0f + 3.0f * kKappa * v * v)), dx);
  }
}

// One clone set per storage type (target_clones does not apply to templates).
GPUTRAIN_CPU_CLONES void gelu_forward(const float* x, float* y, int64_t n) { forward_loop(x, y, n); }
GPUTRAIN_CPU_CLONES void gelu_forward(const uint16_t* x, uint16_t* y, int64_t n) { forward_loop(x, y, n); }
GPUTRAIN_CPU_CLONES void gelu_backward(const float* g, const float* x, float* dx, int64_t n) { backward_loop(g, x, dx, n); }
GPUTRAIN_CPU_CLONES void gelu_backward(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n) {
  backward_loop(g, x, dx, n);
}

// The loops over contiguous float or bf16 tensors (T: float, or bf16's bits), split across
// ATen's intra-op threads.
template <typename T>
torch::Tensor forward_values(const torch::Tensor& x) {
  auto y = torch::empty_like(x);
  const T* in = static_cast<const T*>(x.const_data_ptr());
  T* out = static_cast<T*>(y.data_ptr());
  at::parallel_for(0, x.numel(), at::internal::GRAIN_SIZE,
                   [&](int64_t begin, int64_t end) { gelu_forward(in + begin, out + begin, end - begin); });
  return y;
}

template <typename T>
torch::Tensor backward_values(const torch::Tensor& grad, const torch::Tensor& x) {
  auto dx = torch::empty_like(x);
  const T *g = static_cast<const T*>(grad.const_data_ptr()), *in = static_cast<const T*>(x.const_data_ptr());
  T* out = static_cast<T*>(dx.data_ptr());
  at::parallel_for(0, x.numel(), at::internal::GRAIN_SIZE,
                   [&](int64_t begin, int64_t end) { gelu_backward(g + begin, in + begin, out + begin, end - begin); });
  return dx;
}

torch::Tensor forward_values(const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat ? forward_values<float>(x) : forward_values<uint16_t>(x);
}
torch::Tensor backward_values(const torch::Tensor& grad, const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat ? backward_values<float>(grad, x) : backward_values<uint16_t>(grad, x);
}

class GeluTanh : public torch::autograd::Function<GeluTanh> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    const auto in = x.contiguous();
    ctx->save_for_backward({in});
    return forward_values(in);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto x = ctx->get_saved_variables()[0];
    // A graph of the backward (create_graph, a second derivative) needs ATen's differentiable form.
    if (torch::GradMode::is_enabled()) return {at::gelu_backward(grad[0], x, "tanh")};
    return {backward_values(grad[0].contiguous(), x)};
  }
};

}  // namespace

torch::Tensor gelu_tanh(const torch::Tensor& x) {
  if (!x.device().is_cpu() || (x.scalar_type() != torch::kFloat && x.scalar_type() != torch::kBFloat16))
    return torch::gelu(x, "tanh");
  if (x.requires_grad() && torch::GradMode::is_enabled()) return GeluTanh::apply(x);
  return forward_values(x.contiguous());
}

}  // namespace gputrain
