// The pieces the one optimizer step is composed of. The step itself (Trainer::straight_step,
// train/step.cpp) is forward under autocast, scaled backward, unscale, clip, fused update and
// scaler update; what parallelism, tests and memory need is put around it from outside:
// - ForwardBackward: how one loader batch's forward and backward run (on this device in chunks,
//   or through pipeline stages);
// - StepHooks: called at fixed points of every step (data parallel's gradient sum and
//   synchronized BatchNorm, injected faults), composed in the order they were added.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <torch/types.h>

#include "core/recipe.h"
#include "data/loader.h"
#include "models/registry.h"
#include "train/grad_scaler.h"

namespace gputrain {

// A micro-batch's output and targets -> its loss, weighted by its share of the step's samples.
using WeightedLoss = std::function<torch::Tensor(const torch::Tensor& out, const torch::Tensor& y)>;
// The loss backward starts from (the grad scaler's scaled loss).
using ScaledLoss = std::function<torch::Tensor(const torch::Tensor& loss)>;

class StepHooks {
 public:
  virtual ~StepHooks() = default;
  virtual void begin(int64_t step) {}                       // before the step's first forward
  virtual void before_forward(const torch::Tensor& x) {}    // each forward on this device
  virtual void before_last_backward() {}                    // the step's last backward is next
  virtual torch::Tensor scaled(torch::Tensor loss) { return loss; }  // what backward starts from
  virtual void after_backward() {}                          // every backward of the step is done
  virtual void before_update(int64_t step) {}               // the optimizer update is next
  virtual void end() {}                                     // the step ended, or threw
  virtual void trainable_changed() {}  // parameters were frozen or unfrozen between steps
  // After a step threw out of memory: whether running it again is safe (false once part of
  // it reached other processes).
  virtual bool can_retry() const { return true; }
};

class ForwardBackward {
 public:
  virtual ~ForwardBackward() = default;
  // Forward and backward of `b`, the gradients accumulating. On this device the hooks'
  // before_forward and, when `last` (the step's last batch), before_last_backward are called
  // (the pipeline calls neither: its stage threads run the forwards, and finish gradients in no
  // fixed order). Returns the batch's weighted loss, detached, on the run's device.
  virtual torch::Tensor run(const Batch& b, bool last, const WeightedLoss& weighted, const ScaledLoss& scaled,
                            StepHooks& hooks) = 0;
  // Out of memory in run(): smaller pieces for the next try (throws with a hint when there are
  // none). Returns a line saying what changed.
  virtual std::string shrink(const Batch& b, int64_t step) = 0;
  // Loader batches are cut in this many chunks (1 until an out-of-memory shrink).
  virtual int64_t split() const { return 1; }
  virtual void set_amp(bool amp, torch::ScalarType dtype) {}
};

// On this device: every loader batch in split() chunks, each forward under autocast.
class LocalForwardBackward : public ForwardBackward {
 public:
  LocalForwardBackward(Net& model, const Recipe& recipe) : model_(model), amp_(recipe.amp), dtype_(recipe.amp_dtype),
                                                          device_(recipe.device.type()) {}
  torch::Tensor run(const Batch& b, bool last, const WeightedLoss& weighted, const ScaledLoss& scaled,
                    StepHooks& hooks) override;
  std::string shrink(const Batch& b, int64_t step) override;
  int64_t split() const override { return split_; }
  void set_amp(bool amp, torch::ScalarType dtype) override {
    amp_ = amp;
    dtype_ = dtype;
  }

 private:
  Net& model_;
  bool amp_;
  torch::ScalarType dtype_;
  torch::DeviceType device_;
  int64_t split_ = 1;
};

// Every hook of a list, in order (end() in reverse, as destructors run).
class HookList : public StepHooks {
 public:
  void add(std::unique_ptr<StepHooks> h) {
    if (h) hooks_.push_back(std::move(h));
  }
  void begin(int64_t step) override;
  void before_forward(const torch::Tensor& x) override;
  void before_last_backward() override;
  torch::Tensor scaled(torch::Tensor loss) override;
  void after_backward() override;
  void before_update(int64_t step) override;
  void end() override;
  void trainable_changed() override;
  bool can_retry() const override;

 private:
  std::vector<std::unique_ptr<StepHooks>> hooks_;
};

// GPUTRAIN_FAULT_* (core/faults.h): out of memory at a step, above a chunk size or in the update,
// and overflowing gradients, injected at the points where real ones happen.
std::unique_ptr<StepHooks> fault_hooks(const GradScaler& scaler);

}  // namespace gputrain
