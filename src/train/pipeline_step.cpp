// The pipeline stages as the step's forward and backward (pipeline_step.h).
#include "train/pipeline_step.h"

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {
namespace {

class PipelineForwardBackward : public ForwardBackward {
 public:
  PipelineForwardBackward(std::unique_ptr<Pipeline> pipeline, torch::Device device)
      : pipeline_(std::move(pipeline)), device_(device) {}
  torch::Tensor run(const Batch& b, bool, const WeightedLoss& weighted, const ScaledLoss& scaled,
                    StepHooks&) override {
    // No hook before the last backward: the stage threads finish gradients in an order that
    // differs between ranks, so a data-parallel sum waits until the whole backward is done.
    // The loss comes from the last stage's device; the run reads it on its own.
    const auto loss = [&](const torch::Tensor& out, const torch::Tensor& y) { return weighted({out, {}}, y); };
    return pipeline_->run(b.x(), b.y(), loss, scaled).to(device_, /*non_blocking=*/true);
  }
  std::string shrink(const Batch&, int64_t step) override {
    // The stages cut the batch into micro-batches already: more of them is the remedy.
    throw runtime_error(fmt::format("out of memory with pipeline stages (step {})", step),
                        fmt::format("raise --micro_batches (now {}) for smaller micro-batches, or use more "
                                    "--pipeline_stages",
                                    pipeline_->options().micro_batches));
  }

 private:
  std::unique_ptr<Pipeline> pipeline_;
  torch::Device device_;
};

}  // namespace

std::unique_ptr<ForwardBackward> pipeline_forward_backward(std::unique_ptr<Pipeline> pipeline, torch::Device device) {
  return std::make_unique<PipelineForwardBackward>(std::move(pipeline), device);
}

}  // namespace gputrain
