// Bucketed gradient all-reduce from autograd's post-accumulate hooks.
#include "parallel/grad_sync.h"

#include <chrono>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace gputrain {
namespace {

// Runs after a parameter's gradient was accumulated into .grad in this backward.
class ReadyHook : public torch::autograd::PostAccumulateGradHook {
 public:
  ReadyHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  void operator()(const torch::autograd::Variable& /*param*/) override { fn_(); }

 private:
  std::function<void()> fn_;
};

}  // namespace

GradSync::GradSync(torch::nn::Module& model, Comm& comm, double bucket_mb) : comm_(comm) {
  for (const auto& p : model.parameters())
    if (p.requires_grad()) params_.push_back(p);
  bucket_of_.resize(params_.size());
  const double limit = bucket_mb * 1024 * 1024;
  double bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const auto& p = params_[k];
    const bool fits = !buckets_.empty() && (bucket_mb <= 0 || bytes + static_cast<double>(p.nbytes()) <= limit) &&
                      params_[buckets_.back().params.front()].scalar_type() == p.scalar_type();
    if (!fits) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().params.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes += static_cast<double>(p.nbytes());
  }
  if (bucket_mb > 0) {
    for (size_t k = 0; k < params_.size(); ++k)
      torch::autograd::impl::set_post_acc_grad_hooks(params_[k], std::make_unique<ReadyHook>([this, k] { ready(k); }));
    hooked_ = true;
  }
}

GradSync::~GradSync() {
  if (hooked_)
    for (const auto& p : params_) torch::autograd::impl::post_acc_grad_hooks(p).reset();
}

void GradSync::arm() {
  armed_ = true;
  next_ = 0;
  for (auto& b : buckets_) {
    b.ready = 0;
    b.work.reset();
  }
}

void GradSync::ready(size_t param) {
  if (!armed_) return;
  ++buckets_[bucket_of_[param]].ready;
  // Collectives pair up by order across ranks: launch in bucket order, each once it is full.
  while (next_ < buckets_.size() && buckets_[next_].ready == buckets_[next_].params.size()) launch(buckets_[next_++]);
}

void GradSync::launch(Bucket& b) {
  // One buffer on the collectives' device (the first parameter's): pipeline stages on other
  // GPUs copy their gradients there and back.
  const auto device = params_.front().device();
  std::vector<at::Tensor> parts;
  for (size_t k : b.params) {
    const auto& p = params_[k];
    parts.push_back(p.grad().defined() ? p.grad().reshape(-1).to(device) : at::zeros({p.numel()}, p.options().device(device)));
  }
  b.flat = at::cat(parts);
  b.work = comm_.all_reduce_sum(b.flat);
}

void GradSync::finish() {
  if (!armed_) arm();  // a backward that launched nothing (pipeline stages): everything goes now
  armed_ = false;
  const auto t0 = std::chrono::steady_clock::now();
  while (next_ < buckets_.size()) launch(buckets_[next_++]);  // no overlap (bucket_mb 0), or a gradient that never came
  for (auto& b : buckets_) {
    b.work->wait();
    int64_t offset = 0;
    for (size_t k : b.params) {
      auto& p = params_[k];
      auto sum = b.flat.narrow(0, offset, p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(sum);
      else
        p.mutable_grad() = sum.to(p.device(), /*non_blocking=*/false, /*copy=*/true);
      offset += p.numel();
    }
    b.work.reset();
    b.flat = at::Tensor();
  }
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool GradSync::disarm() {
  const bool launched = armed_ && next_ > 0;
  armed_ = false;
  return launched;
}

double GradSync::take_wait_seconds() {
  const double s = wait_seconds_;
  wait_seconds_ = 0;
  return s;
}

}  // namespace gputrain
