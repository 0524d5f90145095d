// --ema_decay: an exponential moving average of the weights, evaluated and checkpointed beside them.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "step/shard_piece.h"

namespace gputrain {

// --shard (parallel/grad_sync.h): each rank keeps the average of its own slices alone. `average`
// views this rank's averaged slices and `updated` the optimizer's updated ones, piece by piece
// in the same order; `gather` fills one tensor per trainable parameter (the module's order)
// with every rank's slices of the average (a collective: every rank calls it together).
struct EmaSharding {
  std::vector<ShardPiece> average;
  std::vector<torch::Tensor> updated;
  std::function<void(const std::vector<torch::Tensor>& whole)> gather;
};

class Ema {
 public:
  // Starts as a copy of the module's parameters and buffers.
  Ema(torch::nn::Module& module, double decay);
  // ema = decay * ema + (1 - decay) * weights, on the device (no host sync); buffers (BatchNorm
  // statistics) are copied as they are. Where `skipped` (a device flag, may be undefined) is 1,
  // nothing changes: the gate is applied on the device too.
  void update(torch::nn::Module& module, const torch::Tensor& skipped = {});
  // The average starts over from the module's weights and buffers (a resume without one).
  void restart(torch::nn::Module& module);
  // Exchanges the module's weights with the averaged ones without copying (set_data); call it
  // again to swap back. For evaluating the average with the same model. Sharded: between
  // gather() and release() alone.
  void swap(torch::nn::Module& module);
  // The averaged parameters, then buffers (sharded: between gather() and release()).
  std::vector<torch::Tensor> tensors() const;
  // What this rank holds, whole or sharded (its slices): for a finiteness check.
  std::vector<torch::Tensor> held() const;
  // The whole tensors' shapes, strides and dtypes (meta tensors), held whole or sharded.
  std::vector<torch::Tensor> layout() const;
  // Their names, as Module::named_parameters / named_buffers give them ("layer1.0.conv1.weight").
  const std::vector<std::string>& names() const { return names_; }
  // Copies a stored average in, found by name (sharded: this rank's slices of it). Throws
  // std::runtime_error (for the caller to word) when a tensor is missing or of another shape;
  // nothing changes then.
  void load_state(const std::vector<std::pair<std::string, torch::Tensor>>& stored);

  // Keeps this rank's slices of the trainable parameters' average alone from here on (the
  // whole copies are freed); `module` is the one the average was made from.
  void shard(torch::nn::Module& module, EmaSharding s);
  bool sharded() const { return static_cast<bool>(sharding_.gather); }
  // Sharded: the whole average made again from every rank's slices, for an evaluation, a save
  // or an export (every rank calls it together); release() frees it. Unsharded: nothing to do.
  void gather();
  void release();

 private:
  double decay_;
  std::vector<std::string> names_;  // parameters' names, then buffers'
  std::vector<torch::Tensor> params_, buffers_;  // sharded: a trainable parameter's is undefined outside gather()
  std::vector<torch::Tensor> layout_;
  EmaSharding sharding_;
  std::vector<size_t> sharded_params_;  // indices into params_ of the trainable parameters, in order
  std::vector<size_t> piece_param_;     // each of sharding_.average's pieces: its parameter's index
  torch::Device device_ = torch::kCPU;  // the trainable parameters'
  bool whole_ = true;
  void require_whole(const char* what) const;
};

}  // namespace gputrain
