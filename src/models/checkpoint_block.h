// Gradient checkpointing: run a block without keeping its activations, recompute them in backward.
#pragma once
#include <functional>
#include <memory>

#include <torch/nn/module.h>

namespace gputrain {

using BlockFn = std::function<torch::Tensor(const torch::Tensor&)>;

// Runs `fn(x)` (a block whose parameters and buffers all live in `module`) so that only `x` is
// kept for backward; backward re-runs the block and backpropagates through the recomputed graph,
// which accumulates the parameters' .grad as a plain run would and returns x's gradient.
// The recompute replays the forward's RNG (dropout masks match), runs under the forward's
// autocast state, and leaves the module's buffers as the forward left them (BatchNorm running
// statistics are updated once, not twice). `x` must be the only tensor input to the block, and
// the result only reaches the parameters' gradients when x or a parameter requires grad.
torch::Tensor checkpoint_block(std::shared_ptr<torch::nn::Module> module, BlockFn fn, const torch::Tensor& x);

// True where checkpointing makes sense for `module`: training with autograd recording.
bool checkpointing_active(const torch::nn::Module& module);

}  // namespace gputrain
