// The step's optimizer: SGD, Adam or AdamW, updating in ATen's fused kernels or in torch::optim's,
// behind one interface, so that the step asks what it needs (is the update fused? take these
// device inputs) instead of casting to find out. Its state stays torch::optim's, per parameter
// and kept in parameter groups: what checkpoints write (train/optimizer_state.h) and what a
// sharded optimizer slices by group.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "models/registry.h"
#include "step/fine_tune.h"
#include "step/shard_piece.h"

namespace gputrain {

class FusedOptimizer;

enum class OptimizerKind { kSGD, kAdam, kAdamW };

// What make_optimizer builds (the run's --optimizer, --lr, --weight_decay, ... flags).
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double lr = 1e-3;
  double weight_decay = 0;
  double momentum = 0;  // SGD
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999;  // Adam, AdamW
  bool fused = false;                 // the update in ATen's fused kernels (step/fused_optim.h)
};

// Sharded data parallel (ZeRO, parallel/grad_sync.h): this rank updates slices of the
// parameters (step/shard_piece.h); each piece's `flat` has the .grad the gradient sum sets.
struct Sharding {
  std::vector<ShardPiece> pieces;
  std::function<void(torch::Tensor&)> sum_over_ranks;  // in place, and waits
  std::function<void()> gather;  // after an update: every rank's slices into every rank's parameters
};

class Optimizer {
 public:
  // `fused`: `base` itself when its update is fused (make_optimizer knows which it built), else null.
  Optimizer(std::unique_ptr<torch::optim::Optimizer> base, FusedOptimizer* fused, OptimizerKind kind,
            std::vector<double> group_scales);
  ~Optimizer();

  OptimizerKind kind() const { return kind_; }
  std::string name() const;  // "sgd", "adam" or "adamw", as --optimizer spells it
  bool fused() const { return fused_ != nullptr; }
  // torch::optim's optimizer over the whole parameters: its groups say which parameter is where.
  torch::optim::Optimizer& base() { return *base_; }
  // What the update runs on, groups and per-tensor state: the parameters, or when sharded this
  // rank's pieces (the same groups and options, with its pieces in the place of parameters).
  std::vector<torch::optim::OptimizerParamGroup>& param_groups() { return active().param_groups(); }
  auto& state() { return active().state(); }

  // Sharded data parallel: from here on the update runs on `s.pieces`, grouped as their
  // parameters are, and every update ends with s.gather(). The state starts empty: call it
  // before the first step (a checkpoint's state is loaded after).
  void shard(Sharding s);
  bool sharded() const { return shard_ != nullptr; }
  const std::vector<ShardPiece>& pieces() const { return sharding_.pieces; }
  // The total norm of the gradients the update takes, over every rank when sharded (on the
  // device, no host sync).
  torch::Tensor grad_norm();
  // Sharded: `t` summed over the ranks (in place: each rank's overflow flag); else unchanged.
  void sum_over_ranks(torch::Tensor& t);
  // Scales the gradients the update takes so that their total norm (grad_norm()) is at most
  // `max_norm`; returns that norm before clipping.
  torch::Tensor clip_grads(double max_norm);

  // The update. Fused, it divides the gradients by the inputs given since the last update (the
  // grad scaler's scale, the clip divisor) and skips itself on the device where the overflow
  // flag is set; unfused, the gradients are taken as they are (the step unscaled and clipped them).
  void step();
  // The parameters' gradients to none (and the pieces', sharded).
  void zero_grad();
  // Fused updates only (std::logic_error otherwise): what the next step() divides by and skips on.
  void set_scaler_inputs(torch::Tensor grad_scale, torch::Tensor found_inf);
  void set_clip_divisor(torch::Tensor divisor);

  // Every group at `lr` times its share (fine-tuning's layer decay, backbone scale; 1 without).
  void set_lr(double lr);
  // --cuda_graphs (fused only): the learning rate read from device tensors, which refresh_lr()
  // sets outside the graph before every step.
  void use_device_lr();
  void refresh_lr();
  // Checkpoints: the step counts brought up to date from the device before a save, and the
  // device's counters dropped after a state was loaded (no-ops unfused).
  void sync_steps();
  void steps_loaded();

 private:
  std::unique_ptr<torch::optim::Optimizer> base_;
  FusedOptimizer* fused_;  // base_'s or shard_'s: the one that updates
  OptimizerKind kind_;
  std::vector<double> group_scales_;
  std::unique_ptr<torch::optim::Optimizer> shard_;
  Sharding sharding_;
  torch::optim::Optimizer& active() { return shard_ ? *shard_ : *base_; }
  std::vector<torch::Tensor> updated();  // the tensors the update runs on: parameters, or pieces
};

// Two kinds of parameter groups, in the order of their first parameter: weights decay, biases
// and norm scales (1-D) do not; `lr_scale` (fine-tuning) splits them further by their share of
// the learning rate. Every parameter is in a group, frozen ones too: they take no gradient, so
// the update passes them over and keeps no state for them until they are unfrozen.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, Net& model, const LrScale& lr_scale = nullptr);

// The total norm of the parameters' gradients, on the device (on the first gradient's device when
// pipeline stages spread them).
torch::Tensor gradient_norm(const std::vector<torch::Tensor>& params);

// Gradient-norm clipping that stays on the device (torch's clip_grad_norm_ syncs to the host).
// Returns the total norm before clipping: `total` when given (a norm over every rank), else the
// norm of these gradients.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm, torch::Tensor total = {});

}  // namespace gputrain
