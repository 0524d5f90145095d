// Forward and backward on this device, in chunks after an out-of-memory shrink (forward_backward.h).
#include "step/forward_backward.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include "core/autocast.h"
#include "core/error.h"

namespace gputrain {

torch::Tensor LocalForwardBackward::run(const Batch& b, bool last, const WeightedLoss& weighted,
                                        const ScaledLoss& scaled, StepHooks& hooks) {
  torch::Tensor total;
  const auto chunks = b.chunk(split_);  // every field, cut alike
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (last && i + 1 == chunks.size()) hooks.before_last_backward();
    hooks.before_forward(chunks[i]);
    torch::Tensor loss;
    {
      RECORD_USER_SCOPE("gputrain::forward");  // a region of --profile's trace
      AutocastGuard autocast(precision_.amp, device_, precision_.dtype);
      loss = weighted(forward_for_loss(model_, chunks[i], fuse_head_), chunks[i].y());
    }
    {
      RECORD_USER_SCOPE("gputrain::backward");
      if (i + 1 == chunks.size()) hooks.before_batch_backward();
      scaled(loss).backward();  // backward runs outside autocast, as in PyTorch
    }
    auto detached = loss.detach();
    total = total.defined() ? total + detached : detached;
  }
  return total;
}

std::string LocalForwardBackward::shrink(const Batch& b, int64_t step) {
  const int64_t batch = b.samples();
  if (batch / (split_ * 2) < 1)
    throw runtime_error(fmt::format("out of memory even with a micro-batch of 1 sample (step {})", step),
                        "use a smaller model or --width, or a device with more memory");
  split_ *= 2;
  return fmt::format("micro-batch {} -> {}, accumulation x{} (the effective batch is unchanged)", batch * 2 / split_,
                     batch / split_, split_);
}

}  // namespace gputrain
