// The step's optimizer (optimizer.h): parameter groups, the fused or torch::optim update, and
// the learning rate by group.
#include "step/optimizer.h"

#include <algorithm>
#include <stdexcept>

#include <torch/optim.h>

#include "step/fused_optim.h"

namespace gputrain {

Optimizer::Optimizer(std::unique_ptr<torch::optim::Optimizer> base, FusedOptimizer* fused, OptimizerKind kind,
                     std::vector<double> group_scales)
    : base_(std::move(base)), fused_(fused), kind_(kind), group_scales_(std::move(group_scales)) {}

Optimizer::~Optimizer() = default;

std::string Optimizer::name() const {
  return kind_ == OptimizerKind::kSGD ? "sgd" : kind_ == OptimizerKind::kAdam ? "adam" : "adamw";
}

void Optimizer::step() { base_->step(); }

void Optimizer::set_scaler_inputs(torch::Tensor grad_scale, torch::Tensor found_inf) {
  if (!fused_) throw std::logic_error("Optimizer::set_scaler_inputs: the update is not fused");
  fused_->set_scaler_inputs(std::move(grad_scale), std::move(found_inf));
}

void Optimizer::set_clip_divisor(torch::Tensor divisor) {
  if (!fused_) throw std::logic_error("Optimizer::set_clip_divisor: the update is not fused");
  fused_->set_clip_divisor(std::move(divisor));
}

void Optimizer::set_lr(double lr) {
  auto& groups = base_->param_groups();
  for (size_t i = 0; i < groups.size(); ++i)
    groups[i].options().set_lr(i < group_scales_.size() ? lr * group_scales_[i] : lr);
}

void Optimizer::use_device_lr() {
  if (!fused_) throw std::logic_error("--cuda_graphs needs a fused optimizer (the resolver asks for one)");
  fused_->use_device_lr();
}

void Optimizer::refresh_lr() {
  if (fused_) fused_->refresh_lr(base_->param_groups());
}

void Optimizer::sync_steps() {
  if (fused_) fused_->sync_steps();
}

void Optimizer::steps_loaded() {
  if (fused_) fused_->steps_loaded();
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, Net& model, const LrScale& lr_scale) {
  struct Group {
    double scale;
    bool decay;
    std::vector<torch::Tensor> params;
  };
  std::vector<Group> found;
  for (const auto& p : model.named_parameters()) {
    const double scale = lr_scale ? lr_scale(p.key()) : 1.0;
    const bool decay = p.value().dim() >= 2;  // decaying biases and norm scales only hurts accuracy (timm, Lightning)
    auto it = std::find_if(found.begin(), found.end(), [&](const Group& g) { return g.scale == scale && g.decay == decay; });
    if (it == found.end()) it = found.insert(found.end(), Group{scale, decay, {}});
    it->params.push_back(p.value());
  }
  std::vector<double> scales;
  for (const auto& g : found) scales.push_back(g.scale);

  auto groups = [&](auto options) {
    std::vector<torch::optim::OptimizerParamGroup> g;
    for (const auto& f : found) {
      auto o = options;
      o.lr(options.lr() * f.scale);
      if (!f.decay) o.weight_decay(0.0);
      g.emplace_back(f.params, std::make_unique<decltype(options)>(o));
    }
    return g;
  };
  // The fused classes are torch::optim's with another update: the wrapper keeps both views.
  auto wrap = [&](auto base, FusedOptimizer* fused) {
    return std::make_unique<Optimizer>(std::move(base), fused, spec.kind, scales);
  };
  auto build = [&](auto options, auto* fused_type, auto* plain_type) -> std::unique_ptr<Optimizer> {
    using Fused = std::remove_pointer_t<decltype(fused_type)>;
    using Plain = std::remove_pointer_t<decltype(plain_type)>;
    if (spec.fused) {
      auto o = std::make_unique<Fused>(groups(options), options);
      FusedOptimizer* f = o.get();
      return wrap(std::move(o), f);
    }
    return wrap(std::make_unique<Plain>(groups(options), options), nullptr);
  };
  const auto betas = std::make_tuple(spec.beta1, spec.beta2);
  switch (spec.kind) {
    case OptimizerKind::kSGD:
      return build(torch::optim::SGDOptions(spec.lr).momentum(spec.momentum).nesterov(spec.nesterov).weight_decay(
                       spec.weight_decay),
                   static_cast<FusedSGD*>(nullptr), static_cast<torch::optim::SGD*>(nullptr));
    case OptimizerKind::kAdam:
      return build(torch::optim::AdamOptions(spec.lr).betas(betas).weight_decay(spec.weight_decay),
                   static_cast<FusedAdam*>(nullptr), static_cast<torch::optim::Adam*>(nullptr));
    case OptimizerKind::kAdamW:
      break;
  }
  return build(torch::optim::AdamWOptions(spec.lr).betas(betas).weight_decay(spec.weight_decay),
               static_cast<FusedAdamW*>(nullptr), static_cast<torch::optim::AdamW*>(nullptr));
}

}  // namespace gputrain
