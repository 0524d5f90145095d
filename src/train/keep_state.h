// State that a measurement before training must leave as it found it: the random generators and
// the model's buffers (batch-norm statistics). The searches (auto workers, the AMP check) run
// real steps; with these put back, the run trains exactly as if they had not run.
#pragma once
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

namespace gputrain {

// The CPU generator's state, and the device's when it is a GPU.
class RngState {
 public:
  explicit RngState(const torch::Device& device);
  void restore() const;

 private:
  torch::Device device_;
  torch::Tensor cpu_, cuda_;
};

// Puts the generators back when it goes out of scope.
class KeepRng {
 public:
  explicit KeepRng(const torch::Device& device) : state_(device) {}
  ~KeepRng() { state_.restore(); }
  KeepRng(const KeepRng&) = delete;
  KeepRng& operator=(const KeepRng&) = delete;

 private:
  RngState state_;
};

// Copies of a module's tensors (parameters and buffers, or buffers only), copied back in place.
class TensorSnapshot {
 public:
  TensorSnapshot(torch::nn::Module& module, bool with_parameters);
  void restore();

 private:
  std::vector<torch::Tensor> live_, saved_;
};

}  // namespace gputrain
