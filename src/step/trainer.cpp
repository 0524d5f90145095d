// Trainer::step: its shells (CUDA graphs, the out-of-memory split) around the straight step.
#include "step/trainer.h"

#include <ATen/record_function.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/device_cuda.h"
#include "core/error.h"
#include "core/memory_format.h"
#include "core/autocast.h"
#include "step/spike_guard.h"

namespace gputrain {

void to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters())
    p.set_data(to_channels_last(p.data()));
}

Trainer::Trainer(NetPtr model, std::unique_ptr<Optimizer> optimizer, const Recipe& recipe, TrainerOptions options)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      recipe_(recipe),
      opt_(options),
      scaler_(recipe.precision.scaler, recipe.device),
      forward_backward_(std::make_unique<LocalForwardBackward>(*model_, recipe.precision, recipe.device.type(),
                                                               opt_.loss.fused_head)) {
  if (opt_.ema_decay > 0) ema_ = std::make_unique<Ema>(*model_, opt_.ema_decay);
  if (opt_.skip_spikes > 0) hooks_.add(spike_guard(opt_.skip_spikes, recipe.device));
  if (recipe_.cuda_graphs) optimizer_->use_device_lr();
}

StepState Trainer::step_state() const {
  StepState out;
  hooks_.state(out);
  return out;
}

StepResult Trainer::step(const std::vector<Batch>& given) {
  replayed_ = false;
  std::vector<Batch> micro = given;  // handles: a hook may replace a tensor (an injected fault)
  hooks_.inputs(steps_ + 1, micro);
  if (recipe_.cuda_graphs && !graph_off_ && split() > 1)
    drop_graph("out-of-memory backoff splits each batch, which the captured step cannot");
  if (recipe_.cuda_graphs && !graph_off_) {
    // The graph holds one batch shape, the warm-ups' own. Before the capture, a larger batch
    // (the first ones were an epoch's partial tail) starts the warm-up over with its shape.
    const bool captured = graph_ && graph_->captured();
    if (!captured && !static_in_.empty() && micro.front().samples() > static_in_.front().samples()) {
      static_in_.clear();
      graph_warmups_ = 0;
    }
    if (static_in_.empty())
      for (const auto& b : micro) static_in_.push_back(b.map([](const torch::Tensor& t) { return t.clone(); }));
    const std::string why = shape_mismatch(micro);
    if (why.empty()) return graphed_step(micro);
    if (!said_shape_) {
      said_shape_ = true;
      fmt::print(stderr, "gputrain: CUDA graph not replayed at step {}: {}; such steps run eagerly\n", steps_ + 1, why);
    }
  }
  if (recipe_.cuda_graphs) optimizer_->refresh_lr();
  return eager_step(micro);
}

void Trainer::set_forward_backward(std::unique_ptr<ForwardBackward> fb) {
  forward_backward_ = std::move(fb);
  if (ema_) ema_ = std::make_unique<Ema>(*model_, opt_.ema_decay);  // before any step: the weights themselves
}

void Trainer::precision_changed() {
  scaler_ = GradScaler(recipe_.precision.scaler, recipe_.device);
  reset_graph();  // captured in the old precision
}

void Trainer::trainable_changed() {
  hooks_.trainable_changed();
  reset_graph();  // captured with the old set of gradients
}

void Trainer::reset_graph() {
  graph_.reset();  // captured again after a warm-up
  static_in_.clear();
  static_out_ = {};
  graph_warmups_ = 0;
  optimizer_->zero_grad();
}

void Trainer::drop_graph(const std::string& why) {
  fmt::print(stderr, "gputrain: CUDA graphs off from step {}: {}; steps run eagerly\n", steps_ + 1, why);
  graph_off_ = true;
  graph_.reset();  // frees the graph's memory pool
  static_in_.clear();
  static_out_ = {};
  optimizer_->zero_grad();
}

std::string Trainer::shape_mismatch(const std::vector<Batch>& micro) const {
  auto shape = [](const std::vector<Batch>& bs) {
    std::string s;
    for (const auto& b : bs) s += (s.empty() ? "" : "; ") + b.shape_text();
    return s;
  };
  bool same = micro.size() == static_in_.size();
  for (size_t i = 0; same && i < micro.size(); ++i) same = micro[i].same_layout(static_in_[i]);
  if (same) return "";
  const bool same_samples = micro.size() == static_in_.size() && micro.front().samples() == static_in_.front().samples();
  return fmt::format("batch {} differs from the graph's {} ({})", shape(micro), shape(static_in_),
                     same_samples ? "fields padded to another length" : "a last partial batch, say");
}

StepResult Trainer::graphed_step(const std::vector<Batch>& micro) {
  constexpr int64_t kWarmups = 3;
  optimizer_->refresh_lr();  // outside the graph: the captured update reads it from the device
  if (!graph_) graph_ = std::make_unique<CudaGraph>(recipe_.device.index());
  if (graph_warmups_ < kWarmups) {
    StepResult r;
    graph_->run_on_side_stream([&] { r = eager_step(micro); });
    ++graph_warmups_;
    return r;
  }
  if (!graph_->captured()) {
    // As torch.cuda.graph does: the warm-ups' cached blocks go back, so the graph's own memory
    // pool finds room (a batch size searched close to the limit would not fit both).
    cuda_synchronize(recipe_.device.index());
    cuda_empty_cache();
    try {
      graph_->capture([&] { static_out_ = straight_step(static_in_); });
    } catch (const std::exception& e) {
      std::string what = e.what();
      drop_graph("capturing the step failed (" + what.substr(0, what.find('\n')) + ")");
      return eager_step(micro);
    }
  }
  for (size_t i = 0; i < micro.size(); ++i)
    for (size_t f = 0; f < micro[i].tensors.size(); ++f)
      static_in_[i].tensors[f].copy_(micro[i].tensors[f], /*non_blocking=*/true);
  graph_->replay();
  ++steps_;
  replayed_ = true;
  // Copies: the next replay rewrites the static outputs, and callers keep results across steps.
  auto copy = [](const torch::Tensor& t) { return t.defined() ? t.clone() : t; };
  return {copy(static_out_.loss), copy(static_out_.grad_norm), copy(static_out_.skipped)};
}

StepResult Trainer::eager_step(const std::vector<Batch>& micro) {
  while (true) {
    try {
      StepResult r = straight_step(micro);
      ++steps_;
      return r;
    } catch (const c10::OutOfMemoryError&) {
      // Drop what the failed attempt left (gradients, cached blocks, a captured graph's pool:
      // its steps cannot run split anyway), then retry in smaller pieces.
      if (graph_ && graph_->captured()) drop_graph("out of memory in an eager step");
      optimizer_->zero_grad();
      if (recipe_.cuda) cuda_empty_cache();
      // After the update began, some weights may have moved already: redoing the step would
      // apply it twice. Smaller chunks would not help there anyway (the optimizer's state is
      // what did not fit).
      if (updating_)
        throw runtime_error(fmt::format("out of memory in the optimizer update (step {})", steps_ + 1),
                            "the weights and optimizer state do not fit: use a smaller model, --optimizer sgd, "
                            "or a device with more memory");
      // Part of the gradients went to the other ranks already: their sums cannot be taken back.
      if (!hooks_.can_retry())
        throw runtime_error(fmt::format("out of memory in step {} while its gradients were being summed over the ranks",
                                        steps_ + 1),
                            "lower --batch_size (or set --rank_batch_sizes) so that every rank's step fits");
      const std::string what = forward_backward_->shrink(micro.front(), steps_ + 1);
      fmt::print(stderr, "gputrain: out of memory at step {}: {}\n", steps_ + 1, what);
    }
  }
}

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
  // holds share_ of it), and the hooks sum the gradients over the ranks. A per-token loss is
  // summed and divided by the tokens counted over the whole step, every micro-batch and rank:
  // a token weighs the same whichever micro-batch holds it (averaging each micro-batch's mean
  // would weigh the tokens of short batches more).
  int64_t local = 0;
  for (const auto& b : micro) local += b.samples();
  const double total = static_cast<double>(local) / share_;
  torch::Tensor tokens;
  if (per_token(micro.front().y())) {
    for (const auto& b : micro) tokens = tokens.defined() ? tokens + counted_tokens(b.y()) : counted_tokens(b.y());
    tokens = hooks_.step_total(tokens).clamp_min(1);  // a step of padding alone counts as one
  }
  const WeightedLoss weighted = [&](const ForwardOutput& out, const torch::Tensor& y) {
    if (tokens.defined()) return output_loss(out, y, opt_.loss, /*sum=*/true) / tokens.to(y.device());
    auto loss = output_loss(out, y, opt_.loss);
    return static_cast<double>(y.size(0)) != total ? loss * (static_cast<double>(y.size(0)) / total) : loss;
  };
  const ScaledLoss scaled = [&](const torch::Tensor& loss) { return hooks_.scaled(scaler_.scale(loss)); };
  for (size_t m = 0; m < micro.size(); ++m) {
    auto loss = forward_backward_->run(micro[m], m + 1 == micro.size(), weighted, scaled, hooks_);
    r.loss = r.loss.defined() ? r.loss + loss : loss;
  }
  RECORD_USER_SCOPE("gputrain::optimizer");  // a region of --profile's trace: the gradient sum's wait to the update
  hooks_.after_backward();  // every rank now holds the same gradients, infs included
  updating_ = true;
  hooks_.before_update(steps_ + 1);
  const torch::Tensor skip = hooks_.skip_update(r.loss);
  // Clipping needs the true gradient norm. A fused update divides every gradient by a device
  // scalar anyway (the grad scaler's scale): the clip coefficient joins that divisor, and the
  // norm of the still-scaled gradients is divided by the scale. That saves two passes over the
  // gradients (unscale, clip) and equals clipping after unscale (tests/test_numerics.cpp).
  // Unfused: unscale first, then clip; the scaler's step unscales otherwise.
  if (opt_.clip_max_norm > 0) {
    if (optimizer_->fused()) {
      auto norm = optimizer_->grad_norm();
      if (scaler_.enabled()) norm = (norm / scaler_.scale_tensor().to(norm.device())).reshape({});
      optimizer_->set_clip_divisor(((norm + 1e-6) / opt_.clip_max_norm).clamp_min(1.0));
      r.grad_norm = norm;
    } else {
      scaler_.unscale_(*optimizer_);
      r.grad_norm = optimizer_->clip_grads(opt_.clip_max_norm);
    }
  }
  r.skipped = scaler_.step(*optimizer_, skip);
  if (ema_) ema_->update(*model_, r.skipped);  // a skipped step leaves the average as it is
  scaler_.update();
  optimizer_->zero_grad();
  return r;
}

bool Trainer::probe(const Batch& b) {
  model_->train();
  try {
    hooks_.before_forward(b);
    torch::Tensor loss;
    {
      AutocastGuard autocast(recipe_.precision.amp, recipe_.device.type(), recipe_.precision.dtype);
      loss = output_loss(forward_for_loss(*model_, b, opt_.loss.fused_head), b.y(), opt_.loss);
    }
    loss.backward();  // outside autocast, as in the step
    if (recipe_.cuda) cuda_synchronize(recipe_.device.index());  // surface asynchronous failures here
    optimizer_->zero_grad();
    return true;
  } catch (const c10::OutOfMemoryError&) {
    optimizer_->zero_grad();
    if (recipe_.cuda) cuda_empty_cache();
    return false;
  }
}

}  // namespace gputrain
