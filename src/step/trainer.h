// Trainer::step: the one optimizer step that `train` and `benchmark` both run, with its shells:
// CUDA graph capture and replay, then the out-of-memory split and retry, then the straight step
// (forward under autocast, scaled backward, unscale, clip, fused update, scaler update) with
// whatever was composed around it: the ForwardBackward (this device, or pipeline stages) and the
// StepHooks (data parallel, faults). It knows no run, file or rank beyond what it is given.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_graph.h"
#include "core/recipe.h"
#include "data/loader.h"
#include "models/registry.h"
#include "step/ema.h"
#include "step/forward_backward.h"
#include "step/grad_scaler.h"
#include "step/loss.h"
#include "step/optimizer.h"
#include "step/step_hooks.h"

namespace gputrain {

struct TrainerOptions {
  double clip_max_norm = 0.0;  // 0 = no clipping
  LossSpec loss;
  double ema_decay = 0;  // > 0: keep an exponential moving average of the weights
  double skip_spikes = 0;  // > 1: skip the update of a step whose loss exceeds this x the running mean
};

struct StepResult {
  torch::Tensor loss;       // mean loss over the micro-batches, on the device (no host sync)
  torch::Tensor grad_norm;  // total norm before clipping (defined when clipping is on)
  // 1 when the update was skipped (the scaler's inf/NaN gradients, or a loss spike), on the
  // device; undefined when nothing could skip it.
  torch::Tensor skipped;
};

class Trainer {
 public:
  // `recipe` is the run's, read at every step (its precision may change: precision_changed()):
  // it must outlive the Trainer.
  Trainer(NetPtr model, std::unique_ptr<Optimizer> optimizer, const Recipe& recipe, TrainerOptions options);
  Trainer(NetPtr, std::unique_ptr<Optimizer>, const Recipe&&, TrainerOptions) = delete;

  // One optimizer step over `given` (the step's micro-batches, already on the device):
  // autocast forward -> loss / k -> scaled backward, for each; then unscale -> clip -> step if
  // finite -> scaler update -> zero grads (to none).
  StepResult step(const std::vector<Batch>& given);

  // Out of memory, `step` splits every loader batch into `split` chunks (accumulating over them)
  // and retries: same data, same effective batch, half the activation memory per halving.
  // Throws a runtime error when a chunk would go below one sample.
  int64_t split() const { return forward_backward_->split(); }

  // Forward and backward on `batch` without changing the weights; false when it ran out of
  // memory (the cache is emptied). For the batch-size search and the balance probe.
  bool probe(const Batch& batch);

  Net& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  GradScaler& scaler() { return scaler_; }
  const Recipe& context() const { return recipe_; }
  const LossSpec& loss() const { return opt_.loss; }
  const TrainerOptions& options() const { return opt_; }
  Ema* ema() { return ema_.get(); }  // null without --ema_decay

  // The steps a resumed run had taken: hooks and messages count steps from there.
  void resume_at(int64_t steps) { steps_ = steps; }
  // Composition, before the first step. `hooks` run at fixed points of every step, after those
  // added before them (data parallel's gradient sum, synchronized BatchNorm, faults).
  void add_hooks(std::unique_ptr<StepHooks> hooks) { hooks_.add(std::move(hooks)); }
  // Data parallel: this rank's share of the global batch (its batch size over their sum), by
  // which its loss is weighted, so that the summed gradients equal one big batch's.
  void set_batch_share(double share) { share_ = share; }
  // --pipeline_stages: every loader batch runs through `fb` instead of this device's forward
  // (the model's pieces already placed on the stages' devices; the EMA copy is taken again there).
  void set_forward_backward(std::unique_ptr<ForwardBackward> fb);

  void set_lr(double lr) { optimizer_->set_lr(lr); }
  // Parameters were frozen or unfrozen: the hooks (data parallel's buckets) and a captured CUDA
  // graph, which hold the old set, are rebuilt.
  void trainable_changed();
  // The recipe's precision changed (the AMP fallback, mid-run): a fresh scaler, and a captured
  // graph is dropped to be captured again in the new precision.
  void precision_changed();
  // --cuda_graphs: whether the last step was a graph replay (false while warming up or eager).
  bool replayed() const { return replayed_; }
  // The step hooks' state (the loss-spike guard's running mean): checkpoints keep it. Loading
  // throws std::runtime_error (for the caller to word) for a value of the wrong form.
  StepState step_state() const;
  void load_step_state(const StepState& state) { hooks_.load_state(state); }

 private:
  NetPtr model_;
  std::unique_ptr<Optimizer> optimizer_;
  const Recipe& recipe_;
  TrainerOptions opt_;
  GradScaler scaler_;
  std::unique_ptr<Ema> ema_;
  std::unique_ptr<ForwardBackward> forward_backward_;
  HookList hooks_;
  double share_ = 1;
  int64_t steps_ = 0;
  bool updating_ = false;  // the step has begun the optimizer update (an out-of-memory there is not retried)

  // --cuda_graphs: eager warm-up steps on a side stream, then the whole step captured once,
  // with the batches in static buffers, and replayed. Steps the graph cannot take run eagerly.
  std::unique_ptr<CudaGraph> graph_;
  std::vector<Batch> static_in_;  // what the captured step reads: each step's batches are copied in
  StepResult static_out_;         // what it writes (rewritten by every replay)
  int64_t graph_warmups_ = 0;
  bool graph_off_ = false;      // a capture failed, or out of memory
  bool said_shape_ = false;     // the "batch shape differs" line is printed once
  bool replayed_ = false;

  StepResult eager_step(const std::vector<Batch>& micro);
  StepResult graphed_step(const std::vector<Batch>& micro);
  // How `micro` differs from the batch shape the graph holds ("" when it does not).
  std::string shape_mismatch(const std::vector<Batch>& micro) const;
  // Drops a captured graph (it holds the old gradients or precision): captured again after a warm-up.
  void reset_graph();
  // Turns CUDA graphs off for the rest of the run, freeing the graph, with one line saying why.
  void drop_graph(const std::string& why);
  // Forward, backward and update of one step, with the hooks.
  StepResult straight_step(const std::vector<Batch>& micro);
};

// Converts 4-D parameters to channels_last (Module::to has no memory-format form).
void to_channels_last(torch::nn::Module& module);

}  // namespace gputrain
