// Bucketed gradient all-reduce (or reduce-scatter, sharded) from autograd's post-accumulate hooks.
#include "parallel/grad_sync.h"

#include <algorithm>
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

GradSync::GradSync(torch::nn::Module& model, Comm& comm, double bucket_mb, ShardMode shard)
    : shard_(shard), comm_(comm) {
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
  if (shard_ != ShardMode::kNone) {
    torch::NoGradGuard no_grad;
    for (auto& b : buckets_) {
      std::vector<int64_t> numels;
      for (size_t k : b.params) numels.push_back(params_[k].numel());
      const auto& first = params_[b.params.front()];
      const int64_t cache_line = 64;  // bytes: the CPU fused optimizers' block (shard_layout.h)
      b.layout = shard_layout(numels, comm_.size(), comm_.rank(), cache_line / static_cast<int64_t>(first.element_size()));
      // The parameters move into the bucket (contiguous ones: a channels_last weight's memory
      // order is not its logical order, so it keeps its own storage and is copied): the
      // all-gather then writes them in place and the update of the slice is the update of
      // their elements, which saves two copies of the bucket and an allocation per step (in the
      // MLP of tools/compare_zero.py, 2 ms of a 20 ms step here).
      b.full = at::zeros({b.layout.padded}, first.options());  // the gaps and padding stay zero
      for (size_t j = 0; j < b.params.size(); ++j) {
        auto& p = params_[b.params[j]];
        auto part = b.full.narrow(0, b.layout.starts[j], p.numel());
        part.copy_(p.reshape(-1));
        const bool movable = p.is_contiguous() && p.device() == first.device() && p.scalar_type() == first.scalar_type();
        if (!movable) {
          b.views.emplace_back();
          continue;
        }
        p.set_data(part.view(p.sizes()));
        b.views.push_back(p.data());
      }
      b.slice = b.full.narrow(0, b.layout.begin, b.layout.shard);
      for (const auto& seg : b.layout.segments) b.flats.push_back(b.slice.narrow(0, seg.shard_offset, seg.length));
    }
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
  settled_ = 0;
  for (auto& b : buckets_) {
    b.ready = 0;
    // A bucket still out (a step that failed): its buffers are left to it, not to the pool,
    // for Gloo may still write them.
    if (b.staging.flat.defined()) --stagings_;
    b.staging = {};
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
  launched_ = true;
  // One buffer on the collectives' device (the first parameter's): pipeline stages on other
  // GPUs copy their gradients there and back.
  const auto device = params_.front().device();
  if (shard_ == ShardMode::kNone) {
    // Kept from step to step, as DDP keeps its buckets: a fresh one each step is page-faulted
    // again each step on a CPU (see Bucket).
    if (!b.flat.defined()) {
      int64_t numel = 0;
      for (size_t k : b.params) numel += params_[k].numel();
      b.flat = at::empty({numel}, params_[b.params.front()].options().device(device));
    }
    int64_t offset = 0;
    for (size_t k : b.params) {
      const auto& p = params_[k];
      auto part = b.flat.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      if (!p.grad().defined())
        part.zero_();
      else if (p.grad().data_ptr() != part.data_ptr() || p.grad().strides() != part.strides())  // not last step's view, accumulated in place
        part.copy_(p.grad());  // in logical order, whatever the gradient's memory format
    }
    b.work = comm_.all_reduce_sum(b.flat);
    return;
  }
  // Laid out as the bucket: zeros in the gaps between parameters and in the padding.
  // kOptimizer's one reduce-scatter a step goes through buffers kept (Bucket); kGradients'
  // through the pool's.
  if (shard_ == ShardMode::kGradients) {
    stage(b);
  } else if (!b.flat.defined()) {
    const auto options = params_[b.params.front()].options().device(device);
    b.flat = at::empty({b.layout.padded}, options);
    b.received = at::empty({b.layout.shard}, options);
  }
  int64_t end = 0;  // of the last parameter laid out
  for (size_t j = 0; j < b.params.size(); ++j) {
    const auto& p = params_[b.params[j]];
    b.flat.narrow(0, end, b.layout.starts[j] - end).zero_();
    auto part = b.flat.narrow(0, b.layout.starts[j], p.numel()).view(p.sizes());
    if (p.grad().defined())
      part.copy_(p.grad());  // in logical order, whatever the gradient's memory format
    else
      part.zero_();
    end = b.layout.starts[j] + p.numel();
  }
  b.flat.narrow(0, end, b.layout.padded - end).zero_();
  b.work = comm_.reduce_scatter_sum(b.received, b.flat, &b.scratch);
  // The bucket's gradients are in flight (copied into flat): they are freed now, and the next
  // micro-batch's backward (kGradients) makes fresh ones. kOptimizer launches on the step's last
  // backward alone, after accumulating in the full gradients.
  for (size_t k : b.params) params_[k].mutable_grad() = at::Tensor();
}

void GradSync::collect() {
  while (next_ < buckets_.size()) launch(buckets_[next_++]);  // no overlap (bucket_mb 0), or a gradient that never came
  while (settled_ < next_) receive(buckets_[settled_++]);
}

void GradSync::receive(Bucket& b) {
  b.work->wait();
  b.work.reset();
  if (shard_ == ShardMode::kOptimizer) {
    b.grad = b.received;  // kept for the next step (the sums view received until then)
    return;
  }
  // kGradients: summed over the step's micro-batches in the slice's own buffer, kept from step
  // to step (the sharded gradients); the staging goes back to the pool.
  if (b.summing) {
    b.grad.add_(b.received);
  } else {
    if (!b.grad.defined()) b.grad = at::empty({b.layout.shard}, b.received.options());
    b.grad.copy_(b.received);
    b.summing = true;
  }
  spare_.push_back(std::move(b.staging));
  b.staging = {};
  b.flat = b.received = b.scratch = at::Tensor();
}

void GradSync::stage(Bucket& b) {
  // Both sets out: the oldest bucket in flight is received, which frees its set.
  if (spare_.empty() && stagings_ >= kStagings && settled_ < next_) receive(buckets_[settled_++]);
  const auto& first = params_[b.params.front()];
  while (!spare_.empty() && spare_.back().flat.scalar_type() != first.scalar_type()) {  // made for buckets of another type
    spare_.pop_back();
    --stagings_;
  }
  if (spare_.empty()) {
    int64_t padded = 0, shard = 0;
    for (const auto& c : buckets_) {
      padded = std::max(padded, c.layout.padded);
      shard = std::max(shard, c.layout.shard);
    }
    const auto options = first.options().device(params_.front().device());
    // Gloo's road alone needs scratch, and Gloo is the CPUs' backend (comm.cpp; NCCL on GPUs).
    const bool gloo = options.device().is_cpu();
    spare_.push_back({at::empty({padded}, options), at::empty({shard}, options),
                      gloo ? at::empty({padded}, options) : at::Tensor()});
    ++stagings_;
  }
  b.staging = std::move(spare_.back());
  spare_.pop_back();
  b.flat = b.staging.flat.narrow(0, 0, b.layout.padded);
  b.received = b.staging.received.narrow(0, 0, b.layout.shard);
  b.scratch = b.staging.scratch.defined() ? b.staging.scratch.narrow(0, 0, b.layout.padded) : at::Tensor();
}

void GradSync::begin_step() {
  launched_ = false;
  for (auto& b : buckets_) b.summing = false;  // the last step's sums are done with (the pieces dropped their views)
}

void GradSync::settle() {
  if (!armed_) return;
  collect();  // the previous backward's buckets, those that never filled too
  armed_ = false;
}

void GradSync::arm_micro() {
  settle();
  arm();
}

std::vector<SlicePiece> GradSync::pieces() const {
  std::vector<SlicePiece> out;
  for (const auto& b : buckets_)
    for (size_t i = 0; i < b.layout.segments.size(); ++i) {
      const auto& s = b.layout.segments[i];
      out.push_back({params_[b.params[s.param]], s.param_offset, b.flats[i]});
    }
  return out;
}

std::vector<at::Tensor> GradSync::new_slices() const {
  std::vector<at::Tensor> out;
  for (const auto& b : buckets_) out.push_back(at::zeros_like(b.slice));
  return out;
}

std::vector<SlicePiece> GradSync::pieces(const std::vector<at::Tensor>& slices) const {
  std::vector<SlicePiece> out;
  for (size_t k = 0; k < buckets_.size(); ++k)
    for (const auto& s : buckets_[k].layout.segments)
      out.push_back({params_[buckets_[k].params[s.param]], s.param_offset, slices.at(k).narrow(0, s.shard_offset, s.length)});
  return out;
}

bool GradSync::in_bucket(const Bucket& b, size_t j) const {
  const auto& v = b.views[j];
  const auto& p = params_[b.params[j]];
  return v.defined() && p.data_ptr() == v.data_ptr() && p.sizes() == v.sizes() && p.strides() == v.strides();
}

void GradSync::gather() {
  torch::NoGradGuard no_grad;
  std::vector<std::unique_ptr<CommWork>> work;
  // In place: the slice is in full. A kept buffer carries Gloo's road: kOptimizer's own (free
  // once the reduce-scatter's sum is made), kGradients' pool's (all back once every bucket is
  // received), for as many buckets as the pool has.
  std::vector<at::Tensor> scratch(buckets_.size());
  for (size_t i = 0; i < buckets_.size(); ++i) {
    auto& b = buckets_[i];
    if (shard_ == ShardMode::kOptimizer) scratch[i] = b.scratch;
    if (shard_ == ShardMode::kGradients && i < spare_.size() && spare_[i].scratch.defined())
      scratch[i] = spare_[i].scratch.narrow(0, 0, b.layout.padded);
    work.push_back(comm_.all_gather_into(b.full, b.slice, scratch[i].defined() ? &scratch[i] : nullptr));
  }
  if (shard_ == ShardMode::kOptimizer)
    for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i].scratch = scratch[i];
  for (size_t i = 0; i < buckets_.size(); ++i) {
    work[i]->wait();
    auto& b = buckets_[i];
    for (size_t j = 0; j < b.params.size(); ++j) {
      auto& p = params_[b.params[j]];
      // A parameter outside the bucket (not contiguous, or its data replaced since): copied.
      if (!in_bucket(b, j)) p.detach().copy_(b.full.narrow(0, b.layout.starts[j], p.numel()).view(p.sizes()));
    }
  }
}

void GradSync::gather(const std::vector<at::Tensor>& slices, const std::vector<at::Tensor>& whole) {
  torch::NoGradGuard no_grad;
  // Two buckets in flight at most: the next one travels while this one is copied out, and the
  // gathered copies never take more than two buckets' room.
  std::vector<at::Tensor> full(buckets_.size());
  std::vector<std::unique_ptr<CommWork>> work(buckets_.size());
  auto start = [&](size_t i) {
    full[i] = at::empty({buckets_[i].layout.padded}, slices.at(i).options());
    auto in = slices[i];
    work[i] = comm_.all_gather_into(full[i], in);
  };
  if (!buckets_.empty()) start(0);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (i + 1 < buckets_.size()) start(i + 1);
    work[i]->wait();
    const auto& b = buckets_[i];
    for (size_t j = 0; j < b.params.size(); ++j) {
      const size_t k = b.params[j];
      const auto& p = params_[k];
      whole.at(k).copy_(full[i].narrow(0, b.layout.starts[j], p.numel()).view(p.sizes()));  // copy_ keeps whole[k]'s memory format
    }
    full[i] = at::Tensor();
  }
}

void GradSync::finish() {
  if (!armed_) arm();  // a backward that launched nothing (pipeline stages): everything goes now
  armed_ = false;
  const auto t0 = std::chrono::steady_clock::now();
  if (shard_ != ShardMode::kNone) {
    collect();
    // On a GPU the caching allocator keeps freed blocks for the next micro-batch, and the
    // forward's activations may use them meanwhile: the pool outlives a step on CPUs alone,
    // whose glibc would hand its buffers back to the system (Bucket).
    if (!params_.front().device().is_cpu()) {
      spare_.clear();
      stagings_ = 0;
    }
    torch::NoGradGuard no_grad;
    for (auto& b : buckets_) {
      // The slice from the parameters as they are now (a checkpoint or a restore may have
      // written them since the last update), and its summed gradients for the update.
      for (size_t i = 0; i < b.layout.segments.size(); ++i) {
        const auto& s = b.layout.segments[i];
        const auto& p = params_[b.params[s.param]];
        if (!in_bucket(b, s.param)) b.flats[i].copy_(p.reshape(-1).narrow(0, s.param_offset, s.length));
        b.flats[i].mutable_grad() = b.grad.narrow(0, s.shard_offset, s.length);
      }
    }
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return;
  }
  while (next_ < buckets_.size()) launch(buckets_[next_++]);  // no overlap (bucket_mb 0), or a gradient that never came
  for (auto& b : buckets_) {
    b.work->wait();
    int64_t offset = 0;
    for (size_t k : b.params) {
      auto& p = params_[k];
      auto sum = b.flat.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      // The gradient becomes its sum's view in the bucket (DDP's gradient_as_bucket_view): no
      // copy back. A gradient of another memory format (a channels_last weight's), device or
      // type keeps its own tensor, for the optimizer reads it beside its parameter.
      const bool view = p.is_contiguous() && p.device() == sum.device() && p.scalar_type() == sum.scalar_type() &&
                        (!p.grad().defined() || p.grad().is_contiguous());
      if (view)
        p.mutable_grad() = sum;
      else if (p.grad().defined())
        p.mutable_grad().copy_(sum);
      else
        p.mutable_grad() = sum.to(p.device(), /*non_blocking=*/false, /*copy=*/true);
    }
    b.work.reset();
  }
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool GradSync::disarm() {
  armed_ = false;
  return launched_;
}

double GradSync::take_wait_seconds() {
  const double s = wait_seconds_;
  wait_seconds_ = 0;
  return s;
}

}  // namespace gputrain
