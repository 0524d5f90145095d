// The fused optimizer steps: tensors grouped by device and dtype (the kernels' requirement), the
// scaler's scale and overflow flag moved to each group's device, and the step counts kept as
// device tensors (PyTorch's fused path does the same: +1 before the kernel, -found_inf after).
#include "step/fused_optim.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_sub.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <type_traits>

namespace gputrain {
namespace {

// The kernels take tensors of one device and dtype: the bucket for `p` (almost always the only
// one), found by comparison, so that a step allocates no key strings.
template <class Lists>
Lists& bucket(std::vector<Lists>& buckets, const torch::Tensor& p) {
  for (auto& b : buckets)
    if (b.params.front().device() == p.device() && b.params.front().scalar_type() == p.scalar_type()) return b;
  return buckets.emplace_back();
}

torch::Tensor run_closure(const torch::optim::Optimizer::LossClosure& closure) {
  if (!closure) return {};
  at::AutoGradMode grad(true);
  return closure();
}

std::optional<torch::Tensor> on(const torch::Tensor& t, const torch::Device& device) {
  if (!t.defined()) return std::nullopt;
  return t.to(device, /*non_blocking=*/true);
}

}  // namespace

void FusedOptimizer::refresh_lr(std::vector<torch::optim::OptimizerParamGroup>& groups) {
  if (!device_lr_) return;
  if (lr_.size() != groups.size()) {  // once: a tensor per group and device its parameters are on
    lr_.assign(groups.size(), {});
    for (size_t g = 0; g < groups.size(); ++g)
      for (const auto& p : groups[g].params()) {
        auto& list = lr_[g];
        auto on_device = [&](const torch::Tensor& t) { return t.device() == p.device(); };
        if (std::none_of(list.begin(), list.end(), on_device))
          list.push_back(torch::empty({}, p.options().dtype(torch::kFloat)));
      }
  }
  for (size_t g = 0; g < groups.size(); ++g)
    for (auto& t : lr_[g]) t.fill_(groups[g].options().get_lr());
}

const torch::Tensor& FusedOptimizer::lr_on(size_t group, const torch::Device& device) {
  if (group < lr_.size())
    for (const auto& t : lr_[group])
      if (t.device() == device) return t;
  throw std::logic_error("fused optimizer: refresh_lr() must run before a step with device learning rates");
}

torch::Tensor FusedOptimizer::divisor() const {
  if (grad_scale_.defined() && clip_divisor_.defined()) return grad_scale_ * clip_divisor_.to(grad_scale_.device());
  return grad_scale_.defined() ? grad_scale_ : clip_divisor_;
}

template <class Base, class Options, class State>
torch::Tensor FusedAdamBase<Base, Options, State>::step(torch::optim::Optimizer::LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = run_closure(closure);
  const torch::Tensor div = this->divisor();
  for (size_t gi = 0; gi < this->param_groups().size(); ++gi) {
    auto& group = this->param_groups()[gi];
    const auto& o = static_cast<const Options&>(group.options());
    struct Lists {
      std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    };
    std::vector<Lists> by_device;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      void* key = p.unsafeGetTensorImpl();
      auto& slot = this->state()[key];
      if (!slot) {
        auto s = std::make_unique<State>();
        s->step(0);
        s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(s);
      }
      auto& s = static_cast<State&>(*slot);
      auto& step = steps_[key];
      if (!step.defined()) step = torch::full({}, static_cast<double>(s.step()), p.options().dtype(torch::kFloat));
      auto& l = bucket(by_device, p);
      l.params.push_back(p);
      l.grads.push_back(p.grad());
      l.exp_avgs.push_back(s.exp_avg());
      l.exp_avg_sqs.push_back(s.exp_avg_sq());
      l.steps.push_back(step);
    }
    const auto [beta1, beta2] = o.betas();
    for (auto& l : by_device) {
      const auto device = l.params.front().device();
      const auto scale = on(div, device), found = on(found_inf_, device);
      at::_foreach_add_(l.steps, 1);
      auto update = [&](const auto& lr) {  // a number, or a device tensor (device_lr_)
        if constexpr (std::is_same_v<Options, torch::optim::AdamWOptions>)
          at::_fused_adamw_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, {}, l.steps, lr, beta1, beta2,
                            o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false, scale, found);
        else
          at::_fused_adam_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, {}, l.steps, lr, beta1, beta2,
                           o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false, scale, found);
      };
      if (this->device_lr_)
        update(this->lr_on(gi, device));
      else
        update(o.lr());
      if (found) at::_foreach_sub_(l.steps, std::vector<torch::Tensor>(l.steps.size(), found->reshape({})));
    }
  }
  clear_inputs();
  return loss;
}

template <class Base, class Options, class State>
void FusedAdamBase<Base, Options, State>::sync_steps() {
  for (const auto& [key, count] : steps_)
    if (auto it = this->state().find(key); it != this->state().end())
      static_cast<State&>(*it->second).step(static_cast<int64_t>(count.template item<double>()));
}

template class FusedAdamBase<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState>;
template class FusedAdamBase<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState>;

torch::Tensor FusedSGD::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = run_closure(closure);
  const torch::Tensor div = divisor();
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    auto& group = param_groups()[gi];
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    struct Lists {
      std::vector<torch::Tensor> params, grads, buffers;
      bool first = true;
    };
    std::vector<Lists> by_device;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& l = bucket(by_device, p);
      l.params.push_back(p);
      l.grads.push_back(p.grad());
      if (o.momentum() == 0) continue;
      auto& slot = state()[p.unsafeGetTensorImpl()];
      if (!slot) {
        // Zeros, not PyTorch's empty buffers: a first step skipped for an overflow then leaves a
        // buffer from which the next step computes what a first step would (buf = grad with
        // gputrain's dampening of 0).
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(s);
      } else {
        l.first = false;
      }
      l.buffers.push_back(static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer());
    }
    for (auto& l : by_device) {
      const auto device = l.params.front().device();
      auto update = [&](const auto& lr) {  // a number, or a device tensor (device_lr_)
        at::_fused_sgd_(l.params, l.grads, l.buffers, o.weight_decay(), o.momentum(), lr, o.dampening(), o.nesterov(),
                        /*maximize=*/false, /*is_first_step=*/o.momentum() != 0 && l.first, on(div, device),
                        on(found_inf_, device));
      };
      if (device_lr_)
        update(lr_on(gi, device));
      else
        update(o.lr());
    }
  }
  clear_inputs();
  return loss;
}

}  // namespace gputrain
