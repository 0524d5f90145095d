// BatchNorm that data parallel can synchronize (--sync_bn): LibTorch's BatchNorm2d/3d with the
// same parameters and buffers (checkpoints and exports do not change), whose training forward,
// while data parallel has handed it a global normalization, normalizes with the statistics of the
// global batch (parallel/sync_batch_norm.h). Without one, in eval mode, or in one process:
// LibTorch's forward, unchanged.
#pragma once
#include <functional>

#include <torch/nn/modules/batchnorm.h>

namespace gputrain {

// Normalizes x over every rank's batch and updates the running statistics (the arguments of
// parallel's sync_batch_norm, less the reduction it is bound to).
using GlobalBatchNorm =
    std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                torch::Tensor& running_mean, torch::Tensor& running_var, double momentum, double eps)>;

// What data parallel sees of every synchronizable BatchNorm.
class SyncableNorm {
 public:
  virtual ~SyncableNorm() = default;
  void sync_with(const GlobalBatchNorm* norm) { global_ = norm; }  // nullptr: local statistics

 protected:
  const GlobalBatchNorm* global_ = nullptr;
};

template <class Base>
class SyncableBatchNormImpl : public Base, public SyncableNorm {
 public:
  using Base::Base;
  torch::Tensor forward(const torch::Tensor& x) {
    if (!global_ || !this->is_training() || !this->options.track_running_stats() || !this->options.affine())
      return Base::forward(x);
    this->num_batches_tracked += 1;
    const auto m = this->options.momentum();
    const double momentum = m ? *m : 1.0 / this->num_batches_tracked.template item<double>();
    return (*global_)(x, this->weight, this->bias, this->running_mean, this->running_var, momentum,
                      this->options.eps());
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
