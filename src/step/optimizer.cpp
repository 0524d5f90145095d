// The step's optimizer (optimizer.h): parameter groups, the fused or torch::optim update, and
// the learning rate by group.
#include "step/optimizer.h"

#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include <torch/optim.h>

#include "step/fused_optim.h"

namespace gputrain {
namespace {

using torch::optim::OptimizerParamGroup;

// torch::optim's optimizer over `groups`: the class whose update runs in ATen's fused kernels
// (`f` is then set to it), or the plain one (`f` null).
template <class Fused, class Plain, class Options>
std::unique_ptr<torch::optim::Optimizer> build(std::vector<OptimizerParamGroup> groups, const Options& defaults,
                                               bool fused, FusedOptimizer*& f) {
  if (fused) {
    auto o = std::make_unique<Fused>(std::move(groups), defaults);
    f = o.get();
    return o;
  }
  f = nullptr;
  return std::make_unique<Plain>(std::move(groups), defaults);
}

std::unique_ptr<torch::optim::Optimizer> build(OptimizerKind kind, bool fused, std::vector<OptimizerParamGroup> groups,
                                               const torch::optim::OptimizerOptions& defaults, FusedOptimizer*& f) {
  switch (kind) {
    case OptimizerKind::kSGD:
      return build<FusedSGD, torch::optim::SGD>(std::move(groups), static_cast<const torch::optim::SGDOptions&>(defaults),
                                                fused, f);
    case OptimizerKind::kAdam:
      return build<FusedAdam, torch::optim::Adam>(std::move(groups),
                                                  static_cast<const torch::optim::AdamOptions&>(defaults), fused, f);
    case OptimizerKind::kAdamW:
      break;
  }
  return build<FusedAdamW, torch::optim::AdamW>(std::move(groups), static_cast<const torch::optim::AdamWOptions&>(defaults),
                                                fused, f);
}

std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

// The sum of the gradients' squares, accumulated in double precision. Sharded, each rank sums
// its slices' and the ranks add theirs: in float the two orders of summation would round to
// norms a bit apart, and so to other clipping factors (in double, both round to the same float
// but for a rare tie). PyTorch's clip_grad_norm_ sums in float: within 1e-7 of it.
torch::Tensor squares(const std::vector<torch::Tensor>& grads) {
  if (grads.empty()) return torch::zeros({}, torch::kDouble);
  auto norms = at::_foreach_norm(grads, 2, torch::kDouble);
  for (auto& n : norms)  // pipeline stages: gradients on several devices, the total on the first's
    if (n.device() != norms.front().device()) n = n.to(norms.front().device());
  return torch::stack(norms).square().sum();
}

torch::Tensor total_norm(const std::vector<torch::Tensor>& grads) {
  return squares(grads).sqrt().to(torch::kFloat);
}

}  // namespace

torch::Tensor gradient_norm(const std::vector<torch::Tensor>& params) { return total_norm(grads_of(params)); }

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm, torch::Tensor total) {
  auto grads = grads_of(params);
  if (!total.defined()) total = total_norm(grads);
  if (grads.empty()) return total;
  // min(1, max_norm / norm): scaling by a device tensor avoids reading the norm on the host.
  auto coef = (max_norm / (total + 1e-6)).clamp_max(1.0).to(grads[0].scalar_type());
  std::map<std::string, std::vector<torch::Tensor>> by_device;  // one device per foreach call
  for (const auto& g : grads) by_device[g.device().str()].push_back(g);
  for (auto& [device, list] : by_device) at::_foreach_mul_(list, coef.to(list.front().device()));
  return total;
}

Optimizer::Optimizer(std::unique_ptr<torch::optim::Optimizer> base, FusedOptimizer* fused, OptimizerKind kind,
                     std::vector<double> group_scales)
    : base_(std::move(base)), fused_(fused), kind_(kind), group_scales_(std::move(group_scales)) {}

Optimizer::~Optimizer() = default;

std::string Optimizer::name() const {
  return kind_ == OptimizerKind::kSGD ? "sgd" : kind_ == OptimizerKind::kAdam ? "adam" : "adamw";
}

void Optimizer::step() {
  active().step();
  if (shard_) sharding_.gather();
}

void Optimizer::zero_grad() {
  // Gradients are dropped (set to none), not detached in place first as torch::optim's
  // zero_grad does: data parallel's gradients view its buckets and the pieces' view the slices'
  // sums, and a view refuses detach_(). No gradient here has a graph to detach from.
  auto drop = [](torch::optim::Optimizer& o) {
    for (auto& g : o.param_groups())
      for (auto& p : g.params()) p.mutable_grad() = torch::Tensor();
  };
  drop(*base_);
  if (shard_) drop(*shard_);
}

void Optimizer::shard(Sharding s) {
  if (shard_) throw std::logic_error("Optimizer::shard: sharded already");
  // Each piece joins its parameter's group, under a copy of the group's options; a group with
  // no piece on this rank stays, empty, so that groups pair up by position on every rank.
  auto& full = base_->param_groups();
  std::unordered_map<void*, size_t> group_of;
  for (size_t g = 0; g < full.size(); ++g)
    for (const auto& p : full[g].params()) group_of[p.unsafeGetTensorImpl()] = g;
  std::vector<std::vector<torch::Tensor>> lists(full.size());
  for (const auto& piece : s.pieces) {
    auto it = group_of.find(piece.param.unsafeGetTensorImpl());
    if (it == group_of.end()) throw std::logic_error("Optimizer::shard: a piece of a parameter the optimizer does not hold");
    lists[it->second].push_back(piece.flat);
  }
  std::vector<OptimizerParamGroup> groups;
  for (size_t g = 0; g < full.size(); ++g) groups.emplace_back(lists[g], full[g].options().clone());
  shard_ = build(kind_, fused_ != nullptr, std::move(groups), base_->defaults(), fused_);
  sharding_ = std::move(s);
}

std::vector<torch::Tensor> Optimizer::updated() {
  std::vector<torch::Tensor> out;
  for (auto& g : param_groups())
    for (const auto& p : g.params()) out.push_back(p);
  return out;
}

torch::Tensor Optimizer::grad_norm() {
  if (!shard_) return gradient_norm(updated());
  // The squares' sum over the ranks (each rank's pieces are disjoint; padding holds zeros).
  auto sum = squares(grads_of(updated())).reshape({1});
  sharding_.sum_over_ranks(sum);
  return sum.sqrt().reshape({}).to(torch::kFloat);
}

void Optimizer::sum_over_ranks(torch::Tensor& t) {
  if (shard_) sharding_.sum_over_ranks(t);
}

torch::Tensor Optimizer::clip_grads(double max_norm) {
  return clip_grad_norm(updated(), max_norm, shard_ ? grad_norm() : torch::Tensor());
}

void Optimizer::set_scaler_inputs(torch::Tensor grad_scale, torch::Tensor found_inf) {
  if (!fused_) throw std::logic_error("Optimizer::set_scaler_inputs: the update is not fused");
  fused_->set_scaler_inputs(std::move(grad_scale), std::move(found_inf));
}

void Optimizer::set_clip_divisor(torch::Tensor divisor) {
  if (!fused_) throw std::logic_error("Optimizer::set_clip_divisor: the update is not fused");
  fused_->set_clip_divisor(std::move(divisor));
}

void Optimizer::set_lr(double lr) {
  for (auto* o : {base_.get(), shard_.get()}) {
    if (!o) continue;
    auto& groups = o->param_groups();
    for (size_t i = 0; i < groups.size(); ++i)
      groups[i].options().set_lr(i < group_scales_.size() ? lr * group_scales_[i] : lr);
  }
}

void Optimizer::use_device_lr() {
  if (!fused_) throw std::logic_error("--cuda_graphs needs a fused optimizer (the resolver asks for one)");
  fused_->use_device_lr();
}

void Optimizer::refresh_lr() {
  if (fused_) fused_->refresh_lr(active().param_groups());
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
  auto make = [&](const auto& options) {
    FusedOptimizer* f = nullptr;
    auto base = build(spec.kind, spec.fused, groups(options), options, f);
    return std::make_unique<Optimizer>(std::move(base), f, spec.kind, scales);
  };
  const auto betas = std::make_tuple(spec.beta1, spec.beta2);
  switch (spec.kind) {
    case OptimizerKind::kSGD:
      return make(torch::optim::SGDOptions(spec.lr).momentum(spec.momentum).nesterov(spec.nesterov).weight_decay(
          spec.weight_decay));
    case OptimizerKind::kAdam:
      return make(torch::optim::AdamOptions(spec.lr).betas(betas).weight_decay(spec.weight_decay));
    case OptimizerKind::kAdamW:
      break;
  }
  return make(torch::optim::AdamWOptions(spec.lr).betas(betas).weight_decay(spec.weight_decay));
}

}  // namespace gputrain
