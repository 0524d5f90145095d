// What is put around the one optimizer step: StepHooks, called at fixed points of every step
// (data parallel's gradient sum and synchronized BatchNorm, the loss-spike guard, injected
// faults), composed in the order they were added. The step itself knows none of them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "data/device_copy.h"  // Batch

namespace gputrain {

// Tensors a hook keeps across steps, by name: checkpoints hold them, so a resume is exact.
using StepState = std::vector<std::pair<std::string, torch::Tensor>>;

class StepHooks {
 public:
  virtual ~StepHooks() = default;
  // The step's batches, before anything runs (graphs copy them in after): a hook may replace a
  // tensor (an injected fault), never change one in place, since the caller may keep them.
  virtual void inputs(int64_t step, std::vector<Batch>& micro) {}
  virtual void begin(int64_t step) {}                       // before the step's first forward
  virtual void before_forward(const Batch& b) {}            // each forward on this device
  virtual void before_last_backward() {}                    // the step's last backward is next
  // The backward that ends a loader batch (its last chunk's, after an out-of-memory split) is
  // next, after its forward.
  virtual void before_batch_backward() {}
  virtual torch::Tensor scaled(torch::Tensor loss) { return loss; }  // what backward starts from
  // A count of the whole step (the tokens a per-token loss is averaged over), before its first
  // forward: data parallel sums it over the ranks.
  virtual torch::Tensor step_total(torch::Tensor count) { return count; }
  virtual void after_backward() {}                          // every backward of the step is done
  virtual void before_update(int64_t step) {}               // the optimizer update is next
  // Then, from the step's loss (on the device): a device flag, 1 to skip this update as an
  // overflow is skipped (no host sync, so a captured CUDA graph decides it too); undefined: no
  // opinion.
  virtual torch::Tensor skip_update(const torch::Tensor& loss) { return {}; }
  virtual void end() {}                                     // the step ended, or threw
  virtual void trainable_changed() {}  // parameters were frozen or unfrozen between steps
  // After a step threw out of memory: whether running it again is safe (false once part of
  // it reached other processes).
  virtual bool can_retry() const { return true; }
  // Step state: what the hook keeps across steps, added to `out` under names of its own; and
  // put back from a checkpoint's (in place: a captured graph holds the tensors).
  virtual void state(StepState& out) const {}
  virtual void load_state(const StepState& in) {}
};

// Every hook of a list, in order (end() in reverse, as destructors run).
class HookList : public StepHooks {
 public:
  void add(std::unique_ptr<StepHooks> h) {
    if (h) hooks_.push_back(std::move(h));
  }
  void inputs(int64_t step, std::vector<Batch>& micro) override;
  void begin(int64_t step) override;
  void before_forward(const Batch& b) override;
  void before_last_backward() override;
  void before_batch_backward() override;
  torch::Tensor scaled(torch::Tensor loss) override;
  torch::Tensor step_total(torch::Tensor count) override;
  void after_backward() override;
  void before_update(int64_t step) override;
  torch::Tensor skip_update(const torch::Tensor& loss) override;  // any hook's 1 skips
  void end() override;
  void trainable_changed() override;
  bool can_retry() const override;
  void state(StepState& out) const override;
  void load_state(const StepState& in) override;

 private:
  std::vector<std::unique_ptr<StepHooks>> hooks_;
};

}  // namespace gputrain
