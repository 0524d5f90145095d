// Trainer::step: the one optimizer step that `train` and `benchmark` both run.
#include "train/trainer.h"

#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <torch/nn/functional/loss.h>

#include "train/autocast.h"

namespace gputrain {

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return torch::zeros({});
  auto norms = at::_foreach_norm(grads, 2, torch::kFloat);
  auto total = torch::stack(norms).norm();
  // min(1, max_norm / norm): scaling by a device tensor avoids reading the norm on the host.
  auto coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(grads, coef.to(grads[0].scalar_type()));
  return total;
}

void to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters())
    if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
}

Trainer::Trainer(NetPtr model, std::unique_ptr<torch::optim::Optimizer> optimizer,
                 const RunContext& ctx, TrainerOptions options)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      ctx_(ctx),
      opt_(options),
      scaler_(ctx.grad_scaler, ctx.device) {}

Batch Trainer::to_device(const Batch& b) const {
  Batch d;
  d.x = b.x.to(ctx_.device, /*non_blocking=*/ctx_.non_blocking);
  d.y = b.y.to(ctx_.device, /*non_blocking=*/ctx_.non_blocking);
  if (ctx_.channels_last && d.x.dim() == 4) d.x = d.x.contiguous(torch::MemoryFormat::ChannelsLast);
  return d;
}

StepResult Trainer::step(const std::vector<Batch>& micro) {
  model_->train();
  StepResult r;
  const double k = static_cast<double>(micro.size());
  auto ce = torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(opt_.label_smoothing);
  for (const auto& b : micro) {
    torch::Tensor loss;
    {
      AutocastGuard autocast(ctx_.amp, ctx_.device.type(), ctx_.amp_dtype);
      auto logits = model_->forward(b.x);
      loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat), b.y, ce) / k;
    }
    scaler_.scale(loss).backward();  // backward runs outside autocast, as in PyTorch
    auto detached = loss.detach();
    r.loss = r.loss.defined() ? r.loss + detached : detached;
  }
  // Data-parallel all-reduce of the gradients belongs here (after backward, before unscale).
  scaler_.unscale_(*optimizer_);
  if (opt_.clip_max_norm > 0) r.grad_norm = clip_grad_norm(model_->parameters(), opt_.clip_max_norm);
  r.stepped = scaler_.step(*optimizer_);
  scaler_.update();
  optimizer_->zero_grad(/*set_to_none=*/true);
  return r;
}

}  // namespace gputrain
