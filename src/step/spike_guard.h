// --skip_spikes F: a step whose loss exceeds F times the running mean of the losses before it is
// not applied (its gradients dropped, as an overflow's are), the way language-model trainers ride
// out a bad batch instead of letting it throw the weights off. Decided on the device, so CUDA
// graphs keep working; the running mean is step state, so a resume is exact.
#pragma once
#include <memory>

#include "step/step_hooks.h"

namespace gputrain {

std::unique_ptr<StepHooks> spike_guard(double factor, torch::Device device);

}  // namespace gputrain
