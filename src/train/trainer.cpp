// Trainer::step's shells (CUDA graphs, the out-of-memory split) and its composition.
#include "train/trainer.h"

#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/device_cuda.h"
#include "core/error.h"
#include "core/memory_format.h"
#include "core/autocast.h"
#include "train/fused_optim.h"
#include "train/optim.h"

namespace gputrain {

namespace {

std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

torch::Tensor total_norm(const std::vector<torch::Tensor>& grads) {
  if (grads.empty()) return torch::zeros({});
  auto norms = at::_foreach_norm(grads, 2, torch::kFloat);
  for (auto& n : norms)  // pipeline stages: gradients on several devices, the total on the first's
    if (n.device() != norms.front().device()) n = n.to(norms.front().device());
  return torch::stack(norms).norm();
}

// The pipeline stages as the step's forward and backward: they cut each batch into their own
// micro-batches and run them on their schedule.
class PipelineForwardBackward : public ForwardBackward {
 public:
  PipelineForwardBackward(std::unique_ptr<Pipeline> pipeline, torch::Device device)
      : pipeline_(std::move(pipeline)), device_(device) {}
  torch::Tensor run(const Batch& b, bool last, const WeightedLoss& weighted, const ScaledLoss& scaled,
                    StepHooks& hooks) override {
    // No hook before the last backward: the stage threads finish gradients in an order that
    // differs between ranks, so a data-parallel sum waits until the whole backward is done.
    // The loss comes from the last stage's device; the run reads it on its own.
    return pipeline_->run(b.x, b.y, weighted, scaled).to(device_, /*non_blocking=*/true);
  }
  std::string shrink(const Batch&, int64_t step) override {
    // The stages cut the batch into micro-batches already: more of them is the remedy.
    throw runtime_error(fmt::format("out of memory with pipeline stages (step {})", step),
                        fmt::format("raise --micro_batches (now {}) for smaller micro-batches, or use more "
                                    "--pipeline_stages",
                                    pipeline_->options().micro_batches));
  }
  void set_amp(bool amp, torch::ScalarType dtype) override { pipeline_->set_amp(amp, dtype); }
  Pipeline* pipeline() { return pipeline_.get(); }

 private:
  std::unique_ptr<Pipeline> pipeline_;
  torch::Device device_;
};

}  // namespace

torch::Tensor gradient_norm(const std::vector<torch::Tensor>& params) { return total_norm(grads_of(params)); }

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  auto grads = grads_of(params);
  auto total = total_norm(grads);
  if (grads.empty()) return total;
  // min(1, max_norm / norm): scaling by a device tensor avoids reading the norm on the host.
  auto coef = (max_norm / (total + 1e-6)).clamp_max(1.0).to(grads[0].scalar_type());
  std::map<std::string, std::vector<torch::Tensor>> by_device;  // one device per foreach call
  for (const auto& g : grads) by_device[g.device().str()].push_back(g);
  for (auto& [device, list] : by_device) at::_foreach_mul_(list, coef.to(list.front().device()));
  return total;
}

void to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters())
    p.set_data(to_channels_last(p.data()));
}

Trainer::Trainer(NetPtr model, std::unique_ptr<torch::optim::Optimizer> optimizer, const Recipe& ctx,
                 TrainerOptions options)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      ctx_(ctx),
      opt_(options),
      scaler_(ctx.grad_scaler, ctx.device),
      forward_backward_(std::make_unique<LocalForwardBackward>(*model_, ctx_)) {
  hooks_.add(fault_hooks(scaler_));
  if (opt_.ema_decay > 0) ema_ = std::make_unique<Ema>(*model_, opt_.ema_decay);
  if (ctx_.cuda_graphs) {
    auto* fused = dynamic_cast<FusedOptimizer*>(optimizer_.get());
    if (!fused) throw std::logic_error("--cuda_graphs needs a fused optimizer (the resolver asks for one)");
    fused->use_device_lr();
  }
}

StepResult Trainer::step(const std::vector<Batch>& micro) {
  replayed_ = false;
  if (ctx_.cuda_graphs && !graph_off_ && split() > 1)
    drop_graph("out-of-memory backoff splits each batch, which the captured step cannot");
  if (ctx_.cuda_graphs && !graph_off_) {
    // The graph holds one batch shape, the warm-ups' own. Before the capture, a larger batch
    // (the first ones were an epoch's partial tail) starts the warm-up over with its shape.
    const bool captured = graph_ && graph_->captured();
    if (!captured && !static_in_.empty() && micro.front().x.size(0) > static_in_.front().x.size(0)) {
      static_in_.clear();
      graph_warmups_ = 0;
    }
    if (static_in_.empty())
      for (const auto& b : micro) static_in_.push_back({b.x.clone(), b.y.clone()});
    const std::string why = shape_mismatch(micro);
    if (why.empty()) return graphed_step(micro);
    if (!said_shape_) {
      said_shape_ = true;
      fmt::print(stderr, "gputrain: CUDA graph not replayed at step {}: {}; such steps run eagerly\n", steps_ + 1, why);
    }
  }
  if (ctx_.cuda_graphs) dynamic_cast<FusedOptimizer&>(*optimizer_).refresh_lr();
  return eager_step(micro);
}

void Trainer::set_pipeline(std::unique_ptr<Pipeline> pipeline) {
  auto fb = std::make_unique<PipelineForwardBackward>(std::move(pipeline), ctx_.device);
  pipeline_ = fb->pipeline();
  forward_backward_ = std::move(fb);
  if (ema_) ema_ = std::make_unique<Ema>(*model_, opt_.ema_decay);  // before any step: the weights themselves
}

void Trainer::set_precision(const Recipe& precision) {
  ctx_.amp = precision.amp;
  ctx_.amp_dtype = precision.amp_dtype;
  ctx_.grad_scaler = precision.grad_scaler;
  scaler_ = GradScaler(ctx_.grad_scaler, ctx_.device);
  forward_backward_->set_amp(ctx_.amp, ctx_.amp_dtype);
  graph_.reset();
  static_in_.clear();
  static_out_ = {};
  graph_warmups_ = 0;
  optimizer_->zero_grad(/*set_to_none=*/true);
}

void Trainer::set_lr(double lr) { gputrain::set_lr(*optimizer_, lr, lr_scales_); }

void Trainer::trainable_changed() {
  hooks_.trainable_changed();
  graph_.reset();  // captured with the old set of gradients: captured again after a warm-up
  static_in_.clear();
  static_out_ = {};
  graph_warmups_ = 0;
  optimizer_->zero_grad(/*set_to_none=*/true);
}

void Trainer::drop_graph(const std::string& why) {
  fmt::print(stderr, "gputrain: CUDA graphs off from step {}: {}; steps run eagerly\n", steps_ + 1, why);
  graph_off_ = true;
  graph_.reset();  // frees the graph's memory pool
  static_in_.clear();
  static_out_ = {};
  optimizer_->zero_grad(/*set_to_none=*/true);
}

std::string Trainer::shape_mismatch(const std::vector<Batch>& micro) const {
  auto shape = [](const std::vector<Batch>& bs) {
    std::string s;
    for (const auto& b : bs) s += (s.empty() ? "" : ", ") + fmt::format("{}", fmt::join(b.x.sizes(), "x"));
    return s;
  };
  bool same = micro.size() == static_in_.size();
  for (size_t i = 0; same && i < micro.size(); ++i)
    same = micro[i].x.sizes() == static_in_[i].x.sizes() && micro[i].y.sizes() == static_in_[i].y.sizes() &&
           micro[i].x.dtype() == static_in_[i].x.dtype() && micro[i].y.dtype() == static_in_[i].y.dtype();
  if (same) return "";
  return fmt::format("batch {} differs from the graph's {} (a last partial batch, say)", shape(micro), shape(static_in_));
}

StepResult Trainer::graphed_step(const std::vector<Batch>& micro) {
  constexpr int64_t kWarmups = 3;
  auto& fused = dynamic_cast<FusedOptimizer&>(*optimizer_);
  fused.refresh_lr();  // outside the graph: the captured update reads it from the device
  if (!graph_) graph_ = std::make_unique<CudaGraph>(ctx_.device.index());
  if (graph_warmups_ < kWarmups) {
    StepResult r;
    graph_->run_on_side_stream([&] { r = eager_step(micro); });
    ++graph_warmups_;
    return r;
  }
  if (!graph_->captured()) {
    // As torch.cuda.graph does: the warm-ups' cached blocks go back, so the graph's own memory
    // pool finds room (a batch size searched close to the limit would not fit both).
    cuda_synchronize(ctx_.device.index());
    cuda_empty_cache();
    try {
      graph_->capture([&] { static_out_ = straight_step(static_in_); });
    } catch (const std::exception& e) {
      std::string what = e.what();
      drop_graph("capturing the step failed (" + what.substr(0, what.find('\n')) + ")");
      return eager_step(micro);
    }
  }
  for (size_t i = 0; i < micro.size(); ++i) {
    static_in_[i].x.copy_(micro[i].x, /*non_blocking=*/true);
    static_in_[i].y.copy_(micro[i].y, /*non_blocking=*/true);
  }
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
      optimizer_->zero_grad(/*set_to_none=*/true);
      if (ctx_.cuda) cuda_empty_cache();
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

bool Trainer::probe(const Batch& b) {
  model_->train();
  try {
    hooks_.before_forward(b.x);
    {
      AutocastGuard autocast(ctx_.amp, ctx_.device.type(), ctx_.amp_dtype);
      auto logits = model_->forward(b.x);
      auto loss = task_loss(logits, b.y, opt_.loss);
      loss.backward();
    }
    if (ctx_.cuda) cuda_synchronize(ctx_.device.index());  // surface asynchronous failures here
    optimizer_->zero_grad(/*set_to_none=*/true);
    return true;
  } catch (const c10::OutOfMemoryError&) {
    optimizer_->zero_grad(/*set_to_none=*/true);
    if (ctx_.cuda) cuda_empty_cache();
    return false;
  }
}

}  // namespace gputrain
