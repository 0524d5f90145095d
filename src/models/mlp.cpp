// mlp: flatten -> two hidden ReLU layers -> logits. Small and fast; per-op overhead dominates it.
#include <torch/nn.h>

#include "models/family.h"
#include "models/registry.h"

namespace gputrain {
namespace {

class Mlp : public Net {
 public:
  explicit Mlp(const ModelSpec& s) {
    int64_t in = 1;
    for (auto d : s.input_shape) in *= d;
    int64_t hidden = s.width > 0 ? s.width : 512;
    fc1_ = register_module("fc1", torch::nn::Linear(in, hidden));
    fc2_ = register_module("fc2", torch::nn::Linear(hidden, hidden));
    fc3_ = register_module("fc3", torch::nn::Linear(hidden, s.num_classes));
    add_piece("fc1", [this](torch::Tensor x) { return torch::relu(fc1_(x.flatten(1))); }, {fc1_.ptr()});
    add_piece("fc2", [this](torch::Tensor x) { return torch::relu(fc2_(x)); }, {fc2_.ptr()});
    add_piece("fc3", [this](torch::Tensor x) { return fc3_(x); }, {fc3_.ptr()});
  }
  torch::Tensor forward(torch::Tensor x) override { return forward_pieces(x); }

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};

NetPtr make(const ModelSpec& spec) { return std::make_shared<Mlp>(spec); }

}  // namespace

const Family& mlp_family() {
  static const Family f{.name = "mlp",
                        .make = make,
                        .ranks = {},
                        .input = "any (flattened)",
                        .pieces = true,
                        .layers = {"fc1", "fc2", "fc3"},
                        .head = {"fc3"},
                        .twin = "tools/compare_pytorch.py Mlp: nn.Linear fc1, fc2, fc3 with ReLU"};
  return f;
}

}  // namespace gputrain
