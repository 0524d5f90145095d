// BatchNorm that data parallel can synchronize (--sync_bn): LibTorch's BatchNorm2d/3d with the
// same parameters and buffers (checkpoints and exports do not change), whose training forward,
// while the Trainer has handed it a Comm, normalizes with the statistics of the global batch
// (sums all-reduced over the ranks in forward and in backward, as PyTorch's SyncBatchNorm).
// Without a Comm, in eval mode, or in one process: LibTorch's forward, unchanged.
#pragma once
#include <torch/nn/modules/batchnorm.h>

namespace gputrain {

class Comm;

// Global-batch normalization of `x` ([N, C, ...]) over `comm`'s ranks; updates the running
// statistics with the global mean and unbiased variance. Differentiable in x, weight and bias.
torch::Tensor sync_batch_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              torch::Tensor& running_mean, torch::Tensor& running_var, double momentum, double eps,
                              Comm& comm);

// What the Trainer sees of every synchronizable BatchNorm.
class SyncableNorm {
 public:
  virtual ~SyncableNorm() = default;
  void sync_over(Comm* comm) { comm_ = comm; }  // nullptr: local statistics

 protected:
  Comm* comm_ = nullptr;
};

template <class Base>
class SyncableBatchNormImpl : public Base, public SyncableNorm {
 public:
  using Base::Base;
  torch::Tensor forward(const torch::Tensor& x) {
    if (!comm_ || !this->is_training() || !this->options.track_running_stats() || !this->options.affine())
      return Base::forward(x);
    this->num_batches_tracked += 1;
    const auto m = this->options.momentum();
    const double momentum = m ? *m : 1.0 / this->num_batches_tracked.template item<double>();
    return sync_batch_norm(x, this->weight, this->bias, this->running_mean, this->running_var, momentum,
                           this->options.eps(), *comm_);
  }
};

class BatchNorm2dImpl : public SyncableBatchNormImpl<torch::nn::BatchNorm2dImpl> {
 public:
  using SyncableBatchNormImpl::SyncableBatchNormImpl;
};
TORCH_MODULE(BatchNorm2d);

class BatchNorm3dImpl : public SyncableBatchNormImpl<torch::nn::BatchNorm3dImpl> {
 public:
  using SyncableBatchNormImpl::SyncableBatchNormImpl;
};
TORCH_MODULE(BatchNorm3d);

}  // namespace gputrain
