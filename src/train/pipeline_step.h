// The pipeline stages as the step's forward and backward (step/forward_backward.h): composed
// by the run (train/parallelism.h), since the step engine knows nothing of parallel/.
#pragma once
#include <memory>

#include "parallel/pipeline.h"
#include "step/forward_backward.h"

namespace gputrain {

// `pipeline` cuts each loader batch into its own micro-batches and runs them on its schedule;
// the loss comes back on `device` (the run's). The step owns the pipeline from then on (it holds
// the model's pieces, which the Trainer owns).
std::unique_ptr<ForwardBackward> pipeline_forward_backward(std::unique_ptr<Pipeline> pipeline, torch::Device device);

}  // namespace gputrain
