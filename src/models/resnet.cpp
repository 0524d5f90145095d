// resnet18/34/50 with torchvision's layer names and shapes (conv1, bn1, layer1.0.conv1, ...,
// layerN.0.downsample.0/1, fc), so weights map one to one. Two stems: ImageNet (7x7/2 conv +
// 3x3/2 max-pool) and small-image (3x3/1 conv, no max-pool) for 28-64 pixel inputs.
#include <fmt/format.h>
#include <torch/nn.h>

#include "core/error.h"
#include "models/batch_norm.h"
#include "models/checkpoint_block.h"
#include "models/family.h"
#include "models/registry.h"

namespace gputrain {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// What both block kinds share: the optional 1x1 projection of the shortcut.
class Block : public nn::Module {
 protected:
  void add_downsample(int64_t in, int64_t out, int64_t stride) {
    if (stride != 1 || in != out)
      downsample_ = register_module("downsample", nn::Sequential(conv(in, out, 1, stride), BatchNorm2d(out)));
  }
  torch::Tensor shortcut(const torch::Tensor& x) { return downsample_ ? downsample_->forward(x) : x; }

 private:
  nn::Sequential downsample_{nullptr};
};

class BasicBlock : public Block {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in, int64_t planes, int64_t stride) {
    conv1_ = register_module("conv1", conv(in, planes, 3, stride));
    bn1_ = register_module("bn1", BatchNorm2d(planes));
    conv2_ = register_module("conv2", conv(planes, planes, 3, 1));
    bn2_ = register_module("bn2", BatchNorm2d(planes));
    add_downsample(in, planes, stride);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1_(conv1_(x)));
    y = bn2_(conv2_(y));
    return torch::relu(y + shortcut(x));
  }

 private:
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
};

// torchvision's v1.5 bottleneck: the stride sits on the 3x3 conv, not the first 1x1.
class Bottleneck : public Block {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in, int64_t planes, int64_t stride) {
    conv1_ = register_module("conv1", conv(in, planes, 1, 1));
    bn1_ = register_module("bn1", BatchNorm2d(planes));
    conv2_ = register_module("conv2", conv(planes, planes, 3, stride));
    bn2_ = register_module("bn2", BatchNorm2d(planes));
    conv3_ = register_module("conv3", conv(planes, planes * kExpansion, 1, 1));
    bn3_ = register_module("bn3", BatchNorm2d(planes * kExpansion));
    add_downsample(in, planes * kExpansion, stride);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1_(conv1_(x)));
    y = torch::relu(bn2_(conv2_(y)));
    y = bn3_(conv3_(y));
    return torch::relu(y + shortcut(x));
  }

 private:
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
};

bool small_stem(const ModelSpec& s) {
  if (s.stem == "small") return true;
  if (s.stem == "imagenet") return false;
  if (s.stem != "auto") throw usage_error("stem '" + s.stem + "' (expected auto, small or imagenet)");
  return choose_stem(s.input_shape).first == "small";
}

template <typename B>
class ResNet : public Net {
 public:
  ResNet(const ModelSpec& s, std::array<int, 4> blocks) : checkpointing_(s.grad_checkpointing) {
    const int64_t w = s.width > 0 ? s.width : 64;
    small_stem_ = small_stem(s);
    conv1_ = register_module("conv1", small_stem_ ? conv(s.input_shape[0], w, 3, 1) : conv(s.input_shape[0], w, 7, 2));
    bn1_ = register_module("bn1", BatchNorm2d(w));
    int64_t in = w;
    std::vector<std::string> block_names;
    for (int stage = 0; stage < 4; ++stage) {
      const int64_t planes = w << stage;
      auto layer = nn::ModuleList();
      for (int b = 0; b < blocks[stage]; ++b) {
        auto block = std::make_shared<B>(in, planes, b == 0 && stage > 0 ? 2 : 1);
        layer->push_back(block);
        blocks_.push_back(block);
        block_names.push_back(fmt::format("layer{}.{}", stage + 1, b));
        in = planes * B::kExpansion;
      }
      register_module("layer" + std::to_string(stage + 1), layer);
    }
    fc_ = register_module("fc", nn::Linear(in, s.num_classes));
    // Pieces: the stem, each residual block, the pool and classifier.
    add_piece("stem", [this](torch::Tensor x) {
      x = torch::relu(bn1_(conv1_(x)));
      return small_stem_ ? x : torch::max_pool2d(x, 3, 2, 1);
    }, {conv1_.ptr(), bn1_.ptr()});
    for (size_t i = 0; i < blocks_.size(); ++i)
      add_piece(block_names[i], [this, i](torch::Tensor x) { return run_block(i, x); }, {blocks_[i]});
    // Global average pool: unlike adaptive_avg_pool2d, deterministic on CUDA.
    add_piece("fc", [this](torch::Tensor x) { return fc_(x.mean({2, 3})); }, {fc_.ptr()});
  }
  torch::Tensor forward(torch::Tensor x) override { return forward_pieces(x); }

 private:
  bool checkpointing_;
  bool small_stem_ = true;
  nn::Conv2d conv1_{nullptr};
  BatchNorm2d bn1_{nullptr};
  std::vector<std::shared_ptr<B>> blocks_;  // every block of layer1..layer4, in order
  nn::Linear fc_{nullptr};

  torch::Tensor run_block(size_t i, const torch::Tensor& x) {
    const auto& b = blocks_[i];
    if (checkpointing_ && checkpointing_active(*this))
      return checkpoint_block(b, [p = b.get()](const torch::Tensor& t) { return p->forward(t); }, x);
    return b->forward(x);
  }
};

// The three depths share everything but their blocks.
Family resnet(std::string name, NetPtr (*make)(const ModelSpec&)) {
  return {.name = name,
          .make = make,
          .ranks = {3},
          .input = "C x H x W",
          .stem = true,
          .blocks = true,
          .pieces = true,
          // timm's grouping: the stem, then each residual block; fc shares the last block's rate.
          .layers = {"conv1+bn1", "layer1.*", "layer2.*", "layer3.*", "layer4.*"},
          .head = {"fc"},
          .twin = "torchvision.models." + name + " (the same names; --stem imagenet is its stem)"};
}

}  // namespace

const Family& resnet18_family() {
  static const Family f = resnet("resnet18", [](const ModelSpec& s) -> NetPtr {
    return std::make_shared<ResNet<BasicBlock>>(s, std::array{2, 2, 2, 2});
  });
  return f;
}
const Family& resnet34_family() {
  static const Family f = resnet("resnet34", [](const ModelSpec& s) -> NetPtr {
    return std::make_shared<ResNet<BasicBlock>>(s, std::array{3, 4, 6, 3});
  });
  return f;
}
const Family& resnet50_family() {
  static const Family f = resnet("resnet50", [](const ModelSpec& s) -> NetPtr {
    return std::make_shared<ResNet<Bottleneck>>(s, std::array{3, 4, 6, 3});
  });
  return f;
}

}  // namespace gputrain
