// Synchronized BatchNorm: per-channel sums all-reduced in forward (sum, sum of squares, count)
// and in backward (sum of dy, sum of dy * x_hat), in float32 whatever the input's precision.
#include "parallel/sync_batch_norm.h"

#include <torch/autograd.h>

namespace gputrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Every dimension but the channels (dim 1), and the shape a per-channel vector broadcasts in.
std::vector<int64_t> reduce_dims(const torch::Tensor& x) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}
std::vector<int64_t> channel_shape(const torch::Tensor& x) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return shape;
}

class SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, torch::Tensor running_mean, torch::Tensor running_var,
                               double momentum, double eps, int64_t sum_address) {
    const SumOverRanks& sum_over_ranks = *reinterpret_cast<const SumOverRanks*>(sum_address);
    const auto dims = reduce_dims(x);
    const auto shape = channel_shape(x);
    const int64_t c = x.size(1);
    auto xf = x.to(torch::kFloat);
    auto stats = torch::cat({xf.sum(dims), xf.square().sum(dims),
                             torch::full({1}, static_cast<double>(x.numel() / c), xf.options())});
    sum_over_ranks(stats);
    auto count = stats.narrow(0, 2 * c, 1);
    auto mean = stats.narrow(0, 0, c) / count;
    auto var = (stats.narrow(0, c, c) / count - mean.square()).clamp_min(0);  // biased, as normalization uses
    auto invstd = torch::rsqrt(var + eps);
    {
      torch::NoGradGuard no_grad;  // the running variance is unbiased, as BatchNorm keeps it
      running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype()), momentum);
      running_var.mul_(1 - momentum).add_((var * count / (count - 1).clamp_min(1)).to(running_var.dtype()), momentum);
    }
    auto x_hat = (xf - mean.view(shape)) * invstd.view(shape);
    ctx->save_for_backward({x_hat, weight, invstd, count});
    ctx->saved_data["sum"] = sum_address;
    return (x_hat * weight.to(torch::kFloat).view(shape) + bias.to(torch::kFloat).view(shape)).to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const SumOverRanks& sum_over_ranks = *reinterpret_cast<const SumOverRanks*>(ctx->saved_data["sum"].toInt());
    const auto saved = ctx->get_saved_variables();
    const auto &x_hat = saved[0], &weight = saved[1], &invstd = saved[2], &count = saved[3];
    const auto dims = reduce_dims(x_hat);
    const auto shape = channel_shape(x_hat);
    const int64_t c = x_hat.size(1);
    auto dy = grads[0].to(torch::kFloat);
    auto sum_dy = dy.sum(dims), sum_dy_xhat = (dy * x_hat).sum(dims);
    // The weight's and bias's gradients are this rank's part: data parallel sums them with the
    // other parameters'. The input's needs the global sums.
    auto grad_weight = sum_dy_xhat.to(weight.scalar_type()), grad_bias = sum_dy.to(weight.scalar_type());
    auto sums = torch::cat({sum_dy, sum_dy_xhat});
    sum_over_ranks(sums);
    auto mean_dy = sums.narrow(0, 0, c) / count, mean_dy_xhat = sums.narrow(0, c, c) / count;
    auto dx = (dy - mean_dy.view(shape) - x_hat * mean_dy_xhat.view(shape)) *
              (invstd * weight.to(torch::kFloat)).view(shape);
    return {dx.to(grads[0].scalar_type()), grad_weight, grad_bias, {}, {}, {}, {}, {}};
  }
};

}  // namespace

torch::Tensor sync_batch_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              torch::Tensor& running_mean, torch::Tensor& running_var, double momentum, double eps,
                              const SumOverRanks& sum) {
  return SyncBatchNormFunction::apply(x, weight, bias, running_mean, running_var, momentum, eps,
                                      reinterpret_cast<int64_t>(&sum));
}

}  // namespace gputrain
