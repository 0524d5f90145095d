// transformer: an encoder over tokens. A T x F sample is a sequence (each step a token, a shared
// Linear embedding F -> d); an F sample is a table row (each feature a token with its own
// embedding, as in FT-Transformer). A CLS token is prepended; its final state -> LayerNorm -> head.
#include <cmath>

#include <fmt/format.h>
#include <torch/nn.h>

#include "core/error.h"
#include "models/checkpoint_block.h"
#include "models/family.h"
#include "models/registry.h"

namespace gputrain {
namespace {

namespace nn = torch::nn;

class Transformer : public Net {
 public:
  explicit Transformer(const ModelSpec& s) : checkpointing_(s.grad_checkpointing) {
    const int64_t d = s.width > 0 ? s.width : 64;
    const int64_t heads = s.heads > 0 ? s.heads : 4;
    const int64_t depth = s.depth > 0 ? s.depth : 2;
    if (d % heads != 0)
      throw usage_error(fmt::format("transformer width {} is not a multiple of heads {}", d, heads),
                        "pick --width and --heads so that heads divides width (defaults: 64 and 4)");
    sequence_ = s.input_shape.size() == 2;
    const int64_t features = s.input_shape.back();
    const double bound = 1.0 / std::sqrt(double(d));
    if (sequence_) {
      embed_ = register_module("embed", nn::Linear(features, d));
      // Learned positions for the CLS slot and every time step.
      pos_ = register_parameter("pos_embedding", torch::randn({1, s.input_shape[0] + 1, d}) * 0.02);
    } else {
      // One affine map per feature: the bias doubles as the feature's identity (its position).
      feature_weight_ = register_parameter("feature_weight", torch::empty({features, d}).uniform_(-bound, bound));
      feature_bias_ = register_parameter("feature_bias", torch::empty({features, d}).uniform_(-bound, bound));
    }
    cls_ = register_parameter("cls_token", torch::randn({1, 1, d}) * 0.02);
    layers_ = register_module("layers", nn::ModuleList());
    for (int64_t i = 0; i < depth; ++i) {
      nn::TransformerEncoderLayer layer(
          nn::TransformerEncoderLayerOptions(d, heads).dim_feedforward(4 * d).dropout(s.dropout).activation(
              torch::kGELU));
      layers_->push_back(layer);
      encoder_layers_.push_back(layer.ptr());
    }
    norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({d})));
    head_ = register_module("head", nn::Linear(d, s.num_classes));
    // Pieces: the embedding, each encoder layer, the head.
    if (sequence_)
      add_piece("embed", [this](torch::Tensor x) { return embed(x); }, {embed_.ptr()}, {pos_, cls_});
    else
      add_piece("embed", [this](torch::Tensor x) { return embed(x); }, {}, {feature_weight_, feature_bias_, cls_});
    for (size_t i = 0; i < encoder_layers_.size(); ++i)
      add_piece(fmt::format("layers.{}", i), [this, i](torch::Tensor h) { return encode(i, h); }, {encoder_layers_[i]});
    add_piece("head", [this](torch::Tensor h) { return head_(norm_(h.select(0, 0))); },  // the CLS token's final state
              {norm_.ptr(), head_.ptr()});
  }

  torch::Tensor forward(torch::Tensor x) override { return forward_pieces(x); }

 private:
  bool checkpointing_;
  bool sequence_ = false;
  nn::Linear embed_{nullptr};
  torch::Tensor pos_, feature_weight_, feature_bias_, cls_;
  nn::ModuleList layers_{nullptr};
  std::vector<std::shared_ptr<nn::TransformerEncoderLayerImpl>> encoder_layers_;
  nn::LayerNorm norm_{nullptr};
  nn::Linear head_{nullptr};

  // Tokens (T + 1, N, d) with the CLS token first: LibTorch's encoder layer has no batch_first.
  torch::Tensor embed(const torch::Tensor& x) {
    torch::Tensor tokens;  // (N, T, d)
    if (sequence_)
      tokens = embed_(x);
    else
      tokens = x.flatten(1).unsqueeze(-1) * feature_weight_ + feature_bias_;
    tokens = torch::cat({cls_.expand({tokens.size(0), 1, cls_.size(2)}), tokens}, 1);
    if (sequence_) tokens = tokens + pos_;
    return tokens.transpose(0, 1);
  }
  torch::Tensor encode(size_t i, const torch::Tensor& h) {
    const auto& layer = encoder_layers_[i];
    if (checkpointing_ && checkpointing_active(*this))
      return checkpoint_block(layer, [l = layer.get()](const torch::Tensor& t) { return l->forward(t); }, h);
    return layer->forward(h);
  }
};

}  // namespace

const Family& transformer_family() {
  static const Family f{
      .name = "transformer",
      .make = [](const ModelSpec& s) -> NetPtr { return std::make_shared<Transformer>(s); },
      .ranks = {2, 1},
      .input = "T x F or F",
      .options = {"depth", "heads", "dropout"},
      .blocks = true,
      .pieces = true,
      // timm's grouping for a ViT: the embedding (positions or per-feature maps, the CLS token, the
      // sequence's `embed`), each encoder layer, then the final norm with the head.
      .layers = {"pos_embedding+feature_weight+feature_bias+cls_token+embed", "layers.*", "norm"},
      .head = {"head"},
      .twin = "a CLS-token encoder: nn.TransformerEncoderLayer (GELU, post-norm) x depth in `layers`, "
              "nn.LayerNorm norm and nn.Linear head on the CLS state"};
  return f;
}

}  // namespace gputrain
