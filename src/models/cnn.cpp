// cnn: two conv-BN-ReLU-pool stages and a small classifier; the quickstart model.
#include <fmt/format.h>
#include <torch/nn.h>

#include "models/batch_norm.h"
#include "models/family.h"
#include "models/registry.h"

namespace gputrain {
namespace {

namespace nn = torch::nn;

void add_conv_stage(nn::Sequential& seq, int64_t in, int64_t out) {
  seq->push_back(nn::Conv2d(nn::Conv2dOptions(in, out, 3).padding(1).bias(false)));
  seq->push_back(BatchNorm2d(out));
  seq->push_back(nn::ReLU(nn::ReLUOptions(true)));
  seq->push_back(nn::MaxPool2d(2));
}

class Cnn : public Net {
 public:
  explicit Cnn(const ModelSpec& s) {
    int64_t w = s.width > 0 ? s.width : 32;
    int64_t c = s.input_shape[0], h = s.input_shape[1] / 4, wd = s.input_shape[2] / 4;
    nn::Sequential features;
    add_conv_stage(features, c, w);
    add_conv_stage(features, w, 2 * w);
    features_ = register_module("features", features);
    fc1_ = register_module("fc1", nn::Linear(2 * w * std::max<int64_t>(h, 1) * std::max<int64_t>(wd, 1), 128));
    fc2_ = register_module("fc2", nn::Linear(128, s.num_classes));
    // Pieces: each conv stage (conv, BN, ReLU, pool: features.0-3 and 4-7), fc1, fc2.
    for (size_t first : {0, 4}) {
      std::vector<std::shared_ptr<nn::Module>> parts;
      for (size_t i = first; i < first + 4; ++i) parts.push_back(features_->ptr(i));
      add_piece(fmt::format("features.{}-{}", first, first + 3), [this, first](torch::Tensor x) {
        for (size_t k = first; k < first + 4; ++k) x = features_->begin()[static_cast<std::ptrdiff_t>(k)].forward(x);
        return x;
      }, parts);
    }
    add_piece("fc1", [this](torch::Tensor x) { return torch::relu(fc1_(x.flatten(1))); }, {fc1_.ptr()});
    add_piece("fc2", [this](torch::Tensor x) { return fc2_(x); }, {fc2_.ptr()});
  }
  torch::Tensor forward(torch::Tensor x) override { return forward_pieces(x); }

 private:
  nn::Sequential features_{nullptr};
  nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

NetPtr make(const ModelSpec& spec) {
  if (spec.input_shape[1] < 4 || spec.input_shape[2] < 4)
    throw std::invalid_argument("cnn needs inputs of at least 4x4 pixels");
  return std::make_shared<Cnn>(spec);
}

}  // namespace

const Family& cnn_family() {
  static const Family f{.name = "cnn",
                        .make = make,
                        .ranks = {3},
                        .input = "C x H x W",
                        .pieces = true,
                        .layers = {"features", "fc1", "fc2"},
                        .head = {"fc2"},
                        .twin = "tools/compare_pytorch.py Cnn: features = 2 x (Conv2d, BatchNorm2d, ReLU, MaxPool2d), "
                                "nn.Linear fc1, fc2"};
  return f;
}

}  // namespace gputrain
