// --ema_decay: an exponential moving average of the weights, evaluated and checkpointed beside them.
#pragma once
#include <string>
#include <vector>

#include <torch/nn/module.h>

namespace gputrain {

class Ema {
 public:
  // Starts as a copy of the module's parameters and buffers.
  Ema(torch::nn::Module& module, double decay);
  // ema = decay * ema + (1 - decay) * weights, on the device (no host sync); buffers (BatchNorm
  // statistics) are copied as they are. Where `skipped` (a device flag, may be undefined) is 1,
  // nothing changes: the gate is applied on the device too.
  void update(torch::nn::Module& module, const torch::Tensor& skipped = {});
  // Exchanges the module's weights with the averaged ones without copying (set_data); call it
  // again to swap back. For evaluating the average with the same model.
  void swap(torch::nn::Module& module);
  // The averaged parameters, then buffers.
  std::vector<torch::Tensor> tensors() const;
  // Their names, as Module::named_parameters / named_buffers give them ("layer1.0.conv1.weight").
  const std::vector<std::string>& names() const { return names_; }
  // Copies a stored average in, found by name. Throws std::runtime_error (for the caller to word)
  // when a tensor is missing or of another shape; nothing changes then.
  void load_state(const std::vector<std::pair<std::string, torch::Tensor>>& stored);

 private:
  double decay_;
  std::vector<std::string> names_;  // parameters' names, then buffers'
  std::vector<torch::Tensor> params_, buffers_;
};

}  // namespace gputrain
