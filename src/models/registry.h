// The model registry: a name -> factory table, and the Net interface every model implements.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

namespace gputrain {

struct ModelSpec {
  std::vector<int64_t> input_shape;  // C, H, W
  int64_t num_classes = 10;  // outputs: classes, or target values for regression
  int64_t width = 0;  // base width; 0 = the model's default
};

class Net : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};
using NetPtr = std::shared_ptr<Net>;

// Throws a usage error for an unknown name.
NetPtr make_model(const std::string& name, const ModelSpec& spec);
std::vector<std::string> model_names();
int64_t parameter_count(const Net& net);

// One factory per family (one file each).
NetPtr make_mlp(const ModelSpec& spec);
NetPtr make_cnn(const ModelSpec& spec);
NetPtr make_resnet18(const ModelSpec& spec);

}  // namespace gputrain
