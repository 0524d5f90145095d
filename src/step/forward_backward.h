// How one loader batch's forward and backward run inside the step: on this device, in chunks
// (LocalForwardBackward), or through pipeline stages (train/pipeline_step.h, composed by the run).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <torch/types.h>

#include "core/precision.h"
#include "data/loader.h"
#include "models/registry.h"
#include "step/head_loss.h"
#include "step/step_hooks.h"

namespace gputrain {

// A micro-batch's output and targets -> its loss, weighted by its share of the step's samples.
using WeightedLoss = std::function<torch::Tensor(const ForwardOutput& out, const torch::Tensor& y)>;
// The loss backward starts from (the grad scaler's scaled loss).
using ScaledLoss = std::function<torch::Tensor(const torch::Tensor& loss)>;

class ForwardBackward {
 public:
  virtual ~ForwardBackward() = default;
  // Forward and backward of `b`, the gradients accumulating. On this device the hooks'
  // before_forward, before_batch_backward and, when `last` (the step's last batch),
  // before_last_backward are called
  // (the pipeline calls neither: its stage threads run the forwards, and finish gradients in no
  // fixed order). Returns the batch's weighted loss, detached, on the run's device.
  virtual torch::Tensor run(const Batch& b, bool last, const WeightedLoss& weighted, const ScaledLoss& scaled,
                            StepHooks& hooks) = 0;
  // Out of memory in run(): smaller pieces for the next try (throws with a hint when there are
  // none). Returns a line saying what changed.
  virtual std::string shrink(const Batch& b, int64_t step) = 0;
  // Loader batches are cut in this many chunks (1 until an out-of-memory shrink).
  virtual int64_t split() const { return 1; }
};

// On this device: every loader batch in split() chunks, each forward under autocast as the run's
// precision says at that moment; with `fuse_head`, up to a language model's head, which the loss
// computes in chunks (step/head_loss.h).
class LocalForwardBackward : public ForwardBackward {
 public:
  LocalForwardBackward(Net& model, const Precision& precision, torch::DeviceType device, bool fuse_head)
      : model_(model), precision_(precision), device_(device), fuse_head_(fuse_head) {}
  torch::Tensor run(const Batch& b, bool last, const WeightedLoss& weighted, const ScaledLoss& scaled,
                    StepHooks& hooks) override;
  std::string shrink(const Batch& b, int64_t step) override;
  int64_t split() const override { return split_; }

 private:
  Net& model_;
  const Precision& precision_;
  torch::DeviceType device_;
  bool fuse_head_;
  int64_t split_ = 1;
};

}  // namespace gputrain
