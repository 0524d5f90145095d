// cnn3d: for volumes C x D x H x W (e.g. 2 x 256 x 21 x 21 spectrogram-like stacks). Conv3d-BN-ReLU
// blocks halve the depth axis D each time (and H, W while they are at least 16), so a long D
// axis shrinks fast; then a global average pool and a Linear head.
#include <fmt/format.h>
#include <torch/nn.h>

#include "models/batch_norm.h"
#include "models/family.h"
#include "models/registry.h"

namespace gputrain {
namespace {

namespace nn = torch::nn;

class Cnn3d : public Net {
 public:
  explicit Cnn3d(const ModelSpec& s) {
    const int64_t w = s.width > 0 ? s.width : 16;
    const int64_t depth = s.depth > 0 ? s.depth : 4;
    int64_t in = s.input_shape[0], d = s.input_shape[1], h = s.input_shape[2], wd = s.input_shape[3];
    blocks_ = register_module("blocks", nn::Sequential());
    for (int64_t i = 0; i < depth; ++i) {
      const int64_t out = w << std::min<int64_t>(i, 4);  // widths w, 2w, .. 16w, then flat
      const int64_t sd = d >= 2 ? 2 : 1, shw = h >= 16 && wd >= 16 ? 2 : 1;
      blocks_->push_back(nn::Conv3d(nn::Conv3dOptions(in, out, 3).stride({sd, shw, shw}).padding(1).bias(false)));
      blocks_->push_back(BatchNorm3d(out));
      blocks_->push_back(nn::ReLU(nn::ReLUOptions(true)));
      in = out;
      d = (d - 1) / sd + 1;  // kernel 3, padding 1: ceil(d / stride)
      h = (h - 1) / shw + 1;
      wd = (wd - 1) / shw + 1;
    }
    fc_ = register_module("fc", nn::Linear(in, s.num_classes));
    // Pieces: each block (conv, BN, ReLU), then pool and fc.
    for (int64_t i = 0; i < depth; ++i) {
      const auto first = static_cast<size_t>(3 * i);
      add_piece(fmt::format("blocks.{}-{}", first, first + 2), [this, first](torch::Tensor x) {
        for (size_t k = first; k < first + 3; ++k) x = blocks_->begin()[static_cast<std::ptrdiff_t>(k)].forward(x);
        return x;
      }, {blocks_->ptr(first), blocks_->ptr(first + 1), blocks_->ptr(first + 2)});
    }
    // Global average pool (deterministic on CUDA, unlike adaptive pooling), then the classifier.
    add_piece("fc", [this](torch::Tensor x) { return fc_(x.mean({2, 3, 4})); }, {fc_.ptr()});
  }
  torch::Tensor forward(torch::Tensor x) override { return forward_pieces(x); }

 private:
  nn::Sequential blocks_{nullptr};
  nn::Linear fc_{nullptr};
};

}  // namespace

const Family& cnn3d_family() {
  static const Family f{.name = "cnn3d",
                        .make = [](const ModelSpec& s) -> NetPtr { return std::make_shared<Cnn3d>(s); },
                        .ranks = {4},
                        .input = "C x D x H x W",
                        .options = {"depth"},
                        .pieces = true,
                        .layers = {"blocks", "fc"},
                        .head = {"fc"},
                        .twin = "blocks = depth x (Conv3d, BatchNorm3d, ReLU) as nn.Sequential, nn.Linear fc on the "
                                "mean over D, H, W"};
  return f;
}

}  // namespace gputrain
