// GELU's tanh form (GPT-2's activation) on the CPU in one vectorized pass each way. ATen's CPU
// kernel for it is 4-5x slower than its erf form (3.2 ms against 0.7 ms forward for 16 x 256 x
// 512 floats on this project's 2-core machine): 10% of the small GPT's fp32 step went there.
// Here 0.5 x (1 + tanh(u)) is written as x * sigmoid(2u), one exponential per element, and the
// loop is compiled for AVX-512, AVX2 and the baseline, picked at load time. Forward 1.1 ms,
// backward 1.4 ms (2.5 ms in ATen) at that size with the data in cache; inside a GPT step the
// backward's inputs come from memory and it takes ~4 ms either way. Values within a few float
// ulps of ATen's (the tests compare with float64 and torch's gelu). Float tensors on the CPU
// only: other dtypes and devices, and a second derivative, go to ATen's own.
#pragma once
#include <torch/types.h>

namespace gputrain {

// torch.nn.functional.gelu(x, approximate="tanh"), differentiable in x.
torch::Tensor gelu_tanh(const torch::Tensor& x);

}  // namespace gputrain
