// The model registry: a name -> factory table, and the Net interface every model implements.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "core/pieces.h"

namespace gputrain {

struct Config;

struct ModelSpec {
  std::vector<int64_t> input_shape;  // one sample, without the batch: C,H,W / T,F / F / C,D,H,W
  int64_t num_classes = 10;          // outputs: classes, or target values for regression
  int64_t width = 0;                 // base width; 0 = the model's default
  int64_t depth = 0;                 // layers (lstm, gru, transformer) or blocks (cnn3d); 0 = the model's default
  std::string stem = "auto";         // resnets: auto | small | imagenet
  int64_t heads = 0;                 // transformer attention heads; 0 = the default
  double dropout = 0.0;              // transformer layers, between lstm/gru layers
  bool grad_checkpointing = false;   // recompute residual blocks / encoder layers in backward
};

class Net : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  // FLOPs of one sample's forward pass (models/flops.h), counted in make_model's probe; for MFU.
  double flops_per_sample = 0;

  // The forward as consecutive pieces; empty when the model cannot be split into stages.
  // Pipeline stages are cut between pieces (--pipeline_stages).
  const Pieces& pieces() const { return pieces_; }

 protected:
  // A model that declares pieces makes its forward forward_pieces(x): one source of truth.
  void add_piece(std::string name, std::function<torch::Tensor(torch::Tensor)> run,
                 const std::vector<std::shared_ptr<torch::nn::Module>>& modules, std::vector<torch::Tensor> tensors = {});
  // Every piece in order; the result on x's device (evaluation of a model spread over devices).
  torch::Tensor forward_pieces(const torch::Tensor& x) const;

 private:
  Pieces pieces_;
};
using NetPtr = std::shared_ptr<Net>;

// Throws a usage error for an unknown name, or for samples of a rank the model does not take.
NetPtr make_model(const std::string& name, const ModelSpec& spec);
std::vector<std::string> model_names();
std::vector<std::string> model_names_with_pieces();  // the models pipeline stages can split
int64_t parameter_count(const Net& net);

// The sample ranks a model takes (empty = any rank), and how they read, e.g. "C x H x W".
std::vector<size_t> model_input_ranks(const std::string& name);
std::string model_input_text(const std::string& name);

// The spec a Config asks for, for samples of `input_shape` and `outputs` outputs.
ModelSpec model_spec(const Config& c, std::vector<int64_t> input_shape, int64_t outputs);

// One factory per family (one file each).
NetPtr make_mlp(const ModelSpec& spec);
NetPtr make_cnn(const ModelSpec& spec);
NetPtr make_resnet18(const ModelSpec& spec);
NetPtr make_resnet34(const ModelSpec& spec);
NetPtr make_resnet50(const ModelSpec& spec);
NetPtr make_lstm(const ModelSpec& spec);
NetPtr make_gru(const ModelSpec& spec);
NetPtr make_transformer(const ModelSpec& spec);
NetPtr make_cnn3d(const ModelSpec& spec);

}  // namespace gputrain
