// The step itself, straight: forward under autocast, scaled backward, unscale, clip, fused update,
// scaler update. Everything else (gradient sync, pipeline stages, CUDA graphs, the out-of-memory
// split, injected faults) is composed around it: see step.h and trainer.cpp.
#include "train/step.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/autocast.h"
#include "core/error.h"
#include "core/faults.h"
#include "train/fused_optim.h"
#include "train/trainer.h"

namespace gputrain {

StepResult Trainer::straight_step(const std::vector<Batch>& micro) {
  model_->train();
  updating_ = false;
  StepResult r;
  struct End {  // the hooks' end() also when the step throws (a retried out-of-memory step)
    StepHooks& h;
    ~End() { h.end(); }
  } end{hooks_};
  hooks_.begin(steps_ + 1);
  // Each batch's loss is weighted by its share of the step's samples, so the gradient equals that
  // of one batch of them all. With data parallel the share is of the global batch (this rank
  // holds share_ of it), and the hooks sum the gradients over the ranks.
  int64_t local = 0;
  for (const auto& b : micro) local += b.y.size(0);
  const double total = static_cast<double>(local) / share_;
  const WeightedLoss weighted = [&](const torch::Tensor& out, const torch::Tensor& y) {
    auto loss = task_loss(out, y, opt_.loss);
    return static_cast<double>(y.size(0)) != total ? loss * (static_cast<double>(y.size(0)) / total) : loss;
  };
  const ScaledLoss scaled = [&](const torch::Tensor& loss) { return hooks_.scaled(scaler_.scale(loss)); };
  for (size_t m = 0; m < micro.size(); ++m) {
    auto loss = forward_backward_->run(micro[m], m + 1 == micro.size(), weighted, scaled, hooks_);
    r.loss = r.loss.defined() ? r.loss + loss : loss;
  }
  hooks_.after_backward();  // every rank now holds the same gradients, infs included
  updating_ = true;
  hooks_.before_update(steps_ + 1);
  // Clipping needs the true gradient norm. A fused update divides every gradient by a device
  // scalar anyway (the grad scaler's scale): the clip coefficient joins that divisor, and the
  // norm of the still-scaled gradients is divided by the scale. That saves two passes over the
  // gradients (unscale, clip) and equals clipping after unscale (tests/test_numerics.cpp).
  // Unfused: unscale first, then clip; the scaler's step unscales otherwise.
  if (opt_.clip_max_norm > 0) {
    if (auto* fused = dynamic_cast<FusedOptimizer*>(optimizer_.get())) {
      auto norm = gradient_norm(model_->parameters());
      if (scaler_.enabled()) norm = (norm / scaler_.scale_tensor().to(norm.device())).reshape({});
      fused->set_clip_divisor(((norm + 1e-6) / opt_.clip_max_norm).clamp_min(1.0));
      r.grad_norm = norm;
    } else {
      scaler_.unscale_(*optimizer_);
      r.grad_norm = clip_grad_norm(model_->parameters(), opt_.clip_max_norm);
    }
  }
  r.skipped = scaler_.step(*optimizer_);
  if (ema_) ema_->update(*model_, r.skipped);  // a skipped step leaves the average as it is
  scaler_.update();
  optimizer_->zero_grad(/*set_to_none=*/true);
  return r;
}

torch::Tensor LocalForwardBackward::run(const Batch& b, bool last, const WeightedLoss& weighted,
                                        const ScaledLoss& scaled, StepHooks& hooks) {
  torch::Tensor total;
  auto xs = b.x.chunk(split_), ys = b.y.chunk(split_);
  for (size_t i = 0; i < xs.size(); ++i) {
    if (last && i + 1 == xs.size()) hooks.before_last_backward();
    hooks.before_forward(xs[i]);
    torch::Tensor loss;
    {
      AutocastGuard autocast(amp_, device_, dtype_);
      loss = weighted(model_.forward(xs[i]), ys[i]);
    }
    scaled(loss).backward();  // backward runs outside autocast, as in PyTorch
    auto detached = loss.detach();
    total = total.defined() ? total + detached : detached;
  }
  return total;
}

std::string LocalForwardBackward::shrink(const Batch& b, int64_t step) {
  const int64_t batch = b.x.size(0);
  if (batch / (split_ * 2) < 1)
    throw runtime_error(fmt::format("out of memory even with a micro-batch of 1 sample (step {})", step),
                        "use a smaller model or --width, or a device with more memory");
  split_ *= 2;
  return fmt::format("micro-batch {} -> {}, accumulation x{} (the effective batch is unchanged)", batch * 2 / split_,
                     batch / split_, split_);
}

void HookList::begin(int64_t step) {
  for (auto& h : hooks_) h->begin(step);
}
void HookList::before_forward(const torch::Tensor& x) {
  for (auto& h : hooks_) h->before_forward(x);
}
void HookList::before_last_backward() {
  for (auto& h : hooks_) h->before_last_backward();
}
torch::Tensor HookList::scaled(torch::Tensor loss) {
  for (auto& h : hooks_) loss = h->scaled(std::move(loss));
  return loss;
}
void HookList::after_backward() {
  for (auto& h : hooks_) h->after_backward();
}
void HookList::before_update(int64_t step) {
  for (auto& h : hooks_) h->before_update(step);
}
void HookList::end() {
  for (auto it = hooks_.rbegin(); it != hooks_.rend(); ++it) (*it)->end();
}
void HookList::trainable_changed() {
  for (auto& h : hooks_) h->trainable_changed();
}
bool HookList::can_retry() const {
  return std::all_of(hooks_.begin(), hooks_.end(), [](const auto& h) { return h->can_retry(); });
}

namespace {

class FaultHooks : public StepHooks {
 public:
  explicit FaultHooks(const GradScaler& scaler) : scaler_(scaler) {}
  void begin(int64_t step) override {
    step_ = step;
    if (step == faults().oom_step && !oom_done_) {  // once: the retry of the step goes through
      oom_done_ = true;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by GPUTRAIN_FAULT_OOM_STEP");
    }
  }
  void before_forward(const torch::Tensor& x) override {
    if (faults().oom_above >= 0 && x.size(0) > faults().oom_above)
      TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by GPUTRAIN_FAULT_OOM_ABOVE");
  }
  torch::Tensor scaled(torch::Tensor loss) override {
    if (scaler_.enabled() && faults().overflow_step >= 0 && step_ >= faults().overflow_step)
      loss = loss * std::numeric_limits<double>::infinity();  // the gradients overflow, the loss does not
    return loss;
  }
  void before_update(int64_t step) override {
    if (step == faults().oom_update) TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by GPUTRAIN_FAULT_OOM_UPDATE");
  }

 private:
  const GradScaler& scaler_;  // the Trainer's: a new precision replaces its state, not the object
  int64_t step_ = 0;
  bool oom_done_ = false;
};

}  // namespace

std::unique_ptr<StepHooks> fault_hooks(const GradScaler& scaler) {
  const Faults& f = faults();
  if (f.oom_step < 0 && f.oom_above < 0 && f.oom_update < 0 && f.overflow_step < 0) return nullptr;
  return std::make_unique<FaultHooks>(scaler);
}

}  // namespace gputrain
