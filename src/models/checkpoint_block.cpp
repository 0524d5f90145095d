// Gradient checkpointing through a custom autograd Function (the reentrant scheme of
// torch.utils.checkpoint): forward under NoGradGuard, recompute with grad in backward.
#include "models/checkpoint_block.h"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

namespace gputrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the recompute needs to see the world as the forward saw it.
struct BlockState : torch::CustomClassHolder {
  std::shared_ptr<torch::nn::Module> module;
  BlockFn fn;
  torch::Tensor cpu_rng, cuda_rng;  // generator states before the forward
  c10::Device device = torch::kCPU;
  bool autocast_cpu = false, autocast_cuda = false;
  at::ScalarType autocast_cpu_dtype = at::kBFloat16, autocast_cuda_dtype = at::kHalf;
};

torch::Tensor rng_state(at::Generator gen) {  // a handle: copies share the generator
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
void set_rng_state(at::Generator gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Puts the forward's generator states back for the recompute, and the current ones back after
// it, so code after backward draws the same numbers as without checkpointing.
class RngReplay {
 public:
  explicit RngReplay(const BlockState& s) : s_(s) {
    const auto& cpu = at::globalContext().defaultGenerator(torch::kCPU);
    cpu_now_ = rng_state(cpu);
    set_rng_state(cpu, s.cpu_rng);
    if (s.cuda_rng.defined()) {
      const auto& cuda = at::globalContext().defaultGenerator(s.device);
      cuda_now_ = rng_state(cuda);
      set_rng_state(cuda, s.cuda_rng);
    }
  }
  ~RngReplay() {
    set_rng_state(at::globalContext().defaultGenerator(torch::kCPU), cpu_now_);
    if (cuda_now_.defined()) set_rng_state(at::globalContext().defaultGenerator(s_.device), cuda_now_);
  }

 private:
  const BlockState& s_;
  torch::Tensor cpu_now_, cuda_now_;
};

// The forward already updated the buffers (BatchNorm running mean/var, batch count); the
// recompute would update them a second time. Snapshot them and restore after the recompute.
// (The train-mode output uses batch statistics, so the restore does not change the result.)
class BufferRestore {
 public:
  explicit BufferRestore(torch::nn::Module& m) : buffers_(m.buffers()) {
    for (const auto& b : buffers_) saved_.push_back(b.clone());
  }
  ~BufferRestore() {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(saved_[i]);
  }

 private:
  std::vector<torch::Tensor> buffers_, saved_;
};

// Backward runs outside autocast; the recompute must run inside the forward's autocast state
// so it produces the same dtypes (and values) as the forward did.
class AutocastReplay {
 public:
  explicit AutocastReplay(const BlockState& s) {
    for (auto [type, on, dtype] : {std::tuple{at::kCPU, s.autocast_cpu, s.autocast_cpu_dtype},
                                   std::tuple{at::kCUDA, s.autocast_cuda, s.autocast_cuda_dtype}}) {
      prev_.push_back({type, at::autocast::is_autocast_enabled(type), at::autocast::get_autocast_dtype(type)});
      at::autocast::set_autocast_enabled(type, on);
      at::autocast::set_autocast_dtype(type, dtype);
    }
    at::autocast::increment_nesting();
  }
  ~AutocastReplay() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    for (auto [type, on, dtype] : prev_) {
      at::autocast::set_autocast_enabled(type, on);
      at::autocast::set_autocast_dtype(type, dtype);
    }
  }

 private:
  std::vector<std::tuple<at::DeviceType, bool, at::ScalarType>> prev_;
};

struct CheckpointFn : torch::autograd::Function<CheckpointFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, c10::intrusive_ptr<BlockState> s) {
    s->device = x.device();
    s->cpu_rng = rng_state(at::globalContext().defaultGenerator(torch::kCPU));
    if (x.is_cuda()) s->cuda_rng = rng_state(at::globalContext().defaultGenerator(x.device()));
    s->autocast_cpu = at::autocast::is_autocast_enabled(at::kCPU);
    s->autocast_cpu_dtype = at::autocast::get_autocast_dtype(at::kCPU);
    s->autocast_cuda = at::autocast::is_autocast_enabled(at::kCUDA);
    s->autocast_cuda_dtype = at::autocast::get_autocast_dtype(at::kCUDA);
    ctx->save_for_backward({x});
    BlockFn fn = s->fn;
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(s));
    torch::NoGradGuard no_grad;  // the point: no graph, so no activations kept
    return fn(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = c10::static_intrusive_pointer_cast<BlockState>(ctx->saved_data["state"].toCapsule());
    const bool want_x = ctx->needs_input_grad(0);
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(want_x);
    // The restore waits until the recomputed graph's backward is done: batch_norm saves the
    // running statistics for its backward, and restoring them earlier is an in-place change
    // autograd rejects.
    BufferRestore buffers(*s->module);
    torch::Tensor y;
    {
      RngReplay rng(*s);
      AutocastReplay autocast(*s);
      torch::AutoGradMode grad_on(true);
      y = s->fn(x);
    }
    // Accumulates into the block's parameters' .grad, as the un-checkpointed graph would.
    if (y.requires_grad() && grads[0].defined()) torch::autograd::backward({y}, {grads[0]});
    torch::Tensor gx = want_x ? x.grad() : torch::Tensor();
    if (want_x && !gx.defined()) gx = torch::zeros_like(x);
    return {gx, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpoint_block(std::shared_ptr<torch::nn::Module> module, BlockFn fn, const torch::Tensor& x) {
  auto s = c10::make_intrusive<BlockState>();
  s->module = std::move(module);
  s->fn = std::move(fn);
  return CheckpointFn::apply(x, s);
}

bool checkpointing_active(const torch::nn::Module& module) {
  return module.is_training() && torch::GradMode::is_enabled();
}

}  // namespace gputrain
