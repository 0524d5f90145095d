// resnet18 with a small-image stem (3x3 conv, no max-pool), as used for 28-32 pixel inputs.
// Layer names follow torchvision (conv1, bn1, layer1.0.conv1, ..., fc) so weights map one to one.
#include <torch/nn.h>

#include "models/registry.h"

namespace gputrain {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

class BasicBlock : public nn::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride) {
    conv1 = register_module("conv1", conv3x3(in, out, stride));
    bn1 = register_module("bn1", nn::BatchNorm2d(out));
    conv2 = register_module("conv2", conv3x3(out, out, 1));
    bn2 = register_module("bn2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      downsample = register_module(
          "downsample", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                       nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = torch::relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return torch::relu(y + (downsample ? downsample->forward(x) : x));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Sequential downsample{nullptr};
};

class ResNet18 : public Net {
 public:
  explicit ResNet18(const ModelSpec& s) {
    int64_t w = s.width > 0 ? s.width : 64;
    conv1_ = register_module("conv1", conv3x3(s.input_shape[0], w, 1));
    bn1_ = register_module("bn1", nn::BatchNorm2d(w));
    int64_t in = w;
    for (int stage = 0; stage < 4; ++stage) {
      int64_t out = w << stage;
      auto layer = nn::ModuleList();
      for (int b = 0; b < 2; ++b) {
        layer->push_back(std::make_shared<BasicBlock>(in, out, b == 0 && stage > 0 ? 2 : 1));
        in = out;
      }
      layers_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    fc_ = register_module("fc", nn::Linear(in, s.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(bn1_(conv1_(x)));
    for (auto& layer : layers_)
      for (auto& block : *layer) x = block->as<BasicBlock>()->forward(x);
    x = x.mean({2, 3});  // global average pool; unlike adaptive_avg_pool2d, deterministic on CUDA
    return fc_(x);
  }

 private:
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::vector<nn::ModuleList> layers_;
  nn::Linear fc_{nullptr};
};

}  // namespace

NetPtr make_resnet18(const ModelSpec& spec) { return std::make_shared<ResNet18>(spec); }

}  // namespace gputrain
