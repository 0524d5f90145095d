// Trainer::step: the one optimizer step that `train` and `benchmark` both run.
#include "train/trainer.h"

#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/device_cuda.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/memory_format.h"
#include "models/batch_norm.h"
#include "train/autocast.h"
#include "train/fused_optim.h"

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

}  // namespace

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
      scaler_(ctx.grad_scaler, ctx.device) {
  if (opt_.ema_decay > 0) ema_ = std::make_unique<Ema>(*model_, opt_.ema_decay);
  if (ctx_.cuda_graphs) {
    auto* fused = dynamic_cast<FusedOptimizer*>(optimizer_.get());
    if (!fused) throw std::logic_error("--cuda_graphs needs a fused optimizer (the resolver asks for one)");
    fused->use_device_lr();
  }
}

StepResult Trainer::step(const std::vector<Batch>& micro) {
  replayed_ = false;
  if (ctx_.cuda_graphs && !graph_off_ && split_ > 1)
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

int Trainer::set_comm(Comm* comm, double share, double bucket_mb, bool sync_bn) {
  share_ = share;
  comm_ = comm;
  sync_ = std::make_unique<GradSync>(*model_, *comm, bucket_mb);
  sync_norms_.clear();
  if (sync_bn)
    for (const auto& m : model_->modules())
      if (auto* norm = dynamic_cast<SyncableNorm*>(m.get())) sync_norms_.push_back(norm);
  return static_cast<int>(sync_norms_.size());
}

void Trainer::set_pipeline(std::unique_ptr<Pipeline> pipeline) {
  pipeline_ = std::move(pipeline);
  if (ema_) ema_ = std::make_unique<Ema>(*model_, opt_.ema_decay);  // before any step: the weights themselves
}

void Trainer::set_precision(const Recipe& precision) {
  ctx_.amp = precision.amp;
  ctx_.amp_dtype = precision.amp_dtype;
  ctx_.grad_scaler = precision.grad_scaler;
  scaler_ = GradScaler(ctx_.grad_scaler, ctx_.device);
  if (pipeline_) pipeline_->set_amp(ctx_.amp, ctx_.amp_dtype);
  graph_.reset();
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
      graph_->capture([&] { static_out_ = try_step(static_in_); });
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
      StepResult r = try_step(micro);
      ++steps_;
      return r;
    } catch (const c10::OutOfMemoryError&) {
      // Drop what the failed attempt left (gradients, cached blocks, a captured graph's pool:
      // its steps cannot run split anyway), then retry in halves.
      if (graph_ && graph_->captured()) drop_graph("out of memory in an eager step");
      optimizer_->zero_grad(/*set_to_none=*/true);
      if (ctx_.cuda) cuda_empty_cache();
      // Pipeline stages cut the batch into micro-batches already: more of them is the remedy.
      if (pipeline_)
        throw runtime_error(fmt::format("out of memory with pipeline stages (step {})", steps_ + 1),
                            fmt::format("raise --micro_batches (now {}) for smaller micro-batches, or use more "
                                        "--pipeline_stages",
                                        pipeline_->options().micro_batches));
      // After the update began, some weights may have moved already: redoing the step would
      // apply it twice. Smaller chunks would not help there anyway (the optimizer's state is
      // what did not fit).
      if (updating_)
        throw runtime_error(fmt::format("out of memory in the optimizer update (step {})", steps_ + 1),
                            "the weights and optimizer state do not fit: use a smaller model, --optimizer sgd, "
                            "or a device with more memory");
      const int64_t batch = micro.front().x.size(0);
      if (batch / (split_ * 2) < 1)
        throw runtime_error(fmt::format("out of memory even with a micro-batch of 1 sample (step {})", steps_ + 1),
                            "use a smaller model or --width, or a device with more memory");
      split_ *= 2;
      fmt::print(stderr,
                 "gputrain: out of memory at step {}: micro-batch {} -> {}, accumulation x{} "
                 "(the effective batch is unchanged)\n",
                 steps_ + 1, batch * 2 / split_, batch / split_, split_);
    }
  }
}

bool Trainer::probe(const Batch& b) {
  model_->train();
  try {
    if (faults().oom_above >= 0 && b.x.size(0) > faults().oom_above)
      TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by GPUTRAIN_FAULT_OOM_ABOVE");
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

StepResult Trainer::try_step(const std::vector<Batch>& micro) {
  model_->train();
  StepResult r;
  // --sync_bn: the norms all-reduce in this step's forwards and backwards only (every rank runs
  // them alike); probes and checks that one rank runs alone keep local statistics.
  struct SyncNorms {
    const std::vector<SyncableNorm*>& norms;
    SyncNorms(const std::vector<SyncableNorm*>& n, Comm* comm) : norms(n) {
      for (auto* x : norms) x->sync_over(comm);
    }
    ~SyncNorms() {
      for (auto* x : norms) x->sync_over(nullptr);
    }
  } sync_norms(sync_norms_, comm_);
  updating_ = false;
  if (steps_ + 1 == faults().oom_step && split_ == 1)
    TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by GPUTRAIN_FAULT_OOM_STEP");
  // Every loader batch splits into split_ chunks; the loss of each is weighted by its share of
  // the samples, so the gradient equals that of the whole batch. With data parallel, the share
  // is of the global batch (this rank holds share_ of it, padded tails included), and the
  // gradients are summed over the ranks below.
  int64_t local = 0;
  for (const auto& b : micro) local += b.y.size(0);
  const double total = static_cast<double>(local) / share_;
  // Each (micro-)batch's loss weighted by its share, and what backward starts from.
  const auto weighted = [&](const torch::Tensor& out, const torch::Tensor& y) {
    auto loss = task_loss(out, y, opt_.loss);
    return static_cast<double>(y.size(0)) != total ? loss * (static_cast<double>(y.size(0)) / total) : loss;
  };
  const auto scaled = [&](const torch::Tensor& loss) {
    auto s = scaler_.scale(loss);
    if (scaler_.enabled() && faults().overflow_step >= 0 && steps_ + 1 >= faults().overflow_step)
      s = s * std::numeric_limits<double>::infinity();  // the gradients overflow, the loss does not
    return s;
  };
  for (size_t m = 0; m < micro.size(); ++m) {
    const auto& b = micro[m];
    if (pipeline_) {  // the stages cut the batch into their own micro-batches
      // The loss comes from the last stage's device; the run reads it on its own.
      auto loss = pipeline_->run(b.x, b.y, weighted, scaled).to(ctx_.device, /*non_blocking=*/true);
      r.loss = r.loss.defined() ? r.loss + loss : loss;
      continue;
    }
    auto xs = b.x.chunk(split_), ys = b.y.chunk(split_);
    for (size_t i = 0; i < xs.size(); ++i) {
      if (sync_ && m + 1 == micro.size() && i + 1 == xs.size()) sync_->arm();  // the step's last backward
      if (faults().oom_above >= 0 && xs[i].size(0) > faults().oom_above)
        TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by GPUTRAIN_FAULT_OOM_ABOVE");
      torch::Tensor loss;
      {
        AutocastGuard autocast(ctx_.amp, ctx_.device.type(), ctx_.amp_dtype);
        loss = weighted(model_->forward(xs[i]), ys[i]);
      }
      scaled(loss).backward();  // backward runs outside autocast, as in PyTorch
      auto detached = loss.detach();
      r.loss = r.loss.defined() ? r.loss + detached : detached;
    }
  }
  // Data parallel: the buckets launched during the last micro-batch's backward (none on the
  // others) are waited for here, before unscale and clipping, so every rank sees the same
  // gradients, infs included (all skip the same overflow step).
  if (sync_) sync_->finish();
  updating_ = true;
  if (steps_ + 1 == faults().oom_update)
    TORCH_CHECK_WITH(OutOfMemoryError, false, "injected by GPUTRAIN_FAULT_OOM_UPDATE");
  // Clipping needs the true gradient norm. A fused update divides every gradient by a device
  // scalar anyway (the grad scaler's scale): the clip coefficient joins that divisor, and the
  // norm of the still-scaled gradients is divided by the scale. That saves two passes over the
  // gradients (unscale, clip) and equals clipping after unscale (tests/test_numerics.cpp).
  // Unfused: unscale first, then clip; the scaler's step unscales otherwise.
  if (opt_.clip_max_norm > 0) {
    if (auto* fused = dynamic_cast<FusedOptimizer*>(optimizer_.get())) {
      auto norm = total_norm(grads_of(model_->parameters()));
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

}  // namespace gputrain
