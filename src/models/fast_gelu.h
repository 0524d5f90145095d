// GELU's tanh form (GPT-2's activation) on the CPU in one vectorized pass each way. ATen's CPU
// kernel for it is 4-5x slower than its erf form: 10% of the small GPT's fp32 step went there,
// and 12% of its bf16 step. Here 0.5 x (1 + tanh(u)) is written as x * sigmoid(2u), one
// exponential per element, which also keeps its precision for negative inputs, where 1 + tanh(u)
// cancels. The loops are compiled for AVX-512, AVX2 and the baseline, picked at load time, and
// split over ATen's threads. In the small GPT's bf16 step (16 x 256 x 512 values, 2 threads) ATen
// took 4.9 ms a layer forward and 4.5 ms backward; here the backward takes 1.4 ms (computed in
// float, rounded once), 2.3 ms in fp32. Float values within a few ulps of the exact ones,
// bf16 within one bf16 step (the tests compare with float64 and torch's gelu). Float and bf16
// tensors on the CPU only: other dtypes and devices, and a second derivative, go to ATen's own.
#pragma once
#include <torch/types.h>

namespace gputrain {

// torch.nn.functional.gelu(x, approximate="tanh"), differentiable in x.
torch::Tensor gelu_tanh(const torch::Tensor& x);

}  // namespace gputrain
