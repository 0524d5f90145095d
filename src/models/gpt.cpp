// gpt: GPT-2, a decoder-only language model. Token and learned position embeddings, pre-norm
// blocks (LayerNorm -> causal self-attention -> residual, LayerNorm -> MLP with tanh GELU ->
// residual), a final LayerNorm, and a head that is the token embedding itself (tied: one tensor,
// updated once). Parameter names are nanoGPT's (nn.Linear, [out, in]); Hugging Face's GPT-2
// uses the same names with Conv1D weights stored [in, out] (weights/hf_gpt2.cpp maps them).
#include <cmath>

#include <fmt/format.h>
#include <torch/nn.h>

#include "core/error.h"
#include "data/schema.h"
#include "models/attention.h"
#include "models/checkpoint_block.h"
#include "models/documents.h"
#include "models/fast_gelu.h"
#include "models/family.h"
#include "models/gpt.h"
#include "models/lora.h"
#include "models/registry.h"

namespace gputrain {
namespace {

namespace nn = torch::nn;

// GPT-2's initialisation: every weight N(0, 0.02), biases zero, LayerNorm ones and zeros; the
// projections into the residual stream N(0, 0.02 / sqrt(2 x layers)), since each layer adds two
// of them to it (GPT-2 paper, section 2.3; nanoGPT and llm.c do the same).
constexpr double kInitStd = 0.02;

class Block : public nn::Module {
 public:
  Block(int64_t d, int64_t heads, double dropout, int64_t layers) : heads_(heads), dropout_(dropout) {
    ln_1 = register_module("ln_1", nn::LayerNorm(nn::LayerNormOptions({d})));
    auto attn = register_module("attn", std::make_shared<nn::Module>());
    c_attn = attn->register_module("c_attn", Projection(d, 3 * d, true));
    attn_proj = attn->register_module("c_proj", Projection(d, d, true));
    ln_2 = register_module("ln_2", nn::LayerNorm(nn::LayerNormOptions({d})));
    auto mlp = register_module("mlp", std::make_shared<nn::Module>());
    c_fc = mlp->register_module("c_fc", Projection(d, 4 * d, true));
    mlp_proj = mlp->register_module("c_proj", Projection(4 * d, d, true));
    torch::NoGradGuard no_grad;
    const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(layers));
    for (auto* l : {&c_attn, &attn_proj, &c_fc, &mlp_proj}) {
      const bool residual = l == &attn_proj || l == &mlp_proj;
      (*l)->weight.normal_(0, residual ? residual_std : kInitStd);
      (*l)->bias.zero_();
    }
  }

  // `mask` [B, 1, T, T]: which tokens each one sees (packed examples); undefined: causal.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask = {}) {
    auto h = x + dropout(attn_proj(self_attention(ln_1(x), mask)));
    return mlp(h);
  }

  // The block over t new slots [B, t, d] that follow the `length` slots in keys/values [B, H,
  // capacity, d/H], which it extends. `mask` [B, 1, t, length + t] says which slots each new one
  // sees; undefined when that is all the earlier ones and itself onwards in order (causal).
  torch::Tensor forward_cached(const torch::Tensor& x, torch::Tensor& keys, torch::Tensor& values, int64_t length,
                               int64_t capacity, const torch::Tensor& mask) {
    const int64_t B = x.size(0), t = x.size(1), d = x.size(2);
    auto qkv = c_attn(ln_1(x)).view({B, t, 3, heads_, d / heads_}).permute({2, 0, 3, 1, 4});
    if (!keys.defined()) {  // the first call: a cache of the capacity asked for, in the compute dtype
      keys = torch::zeros({B, heads_, capacity, d / heads_}, qkv.options());
      values = torch::zeros_like(keys);
    }
    keys.narrow(2, length, t).copy_(qkv[1]);
    values.narrow(2, length, t).copy_(qkv[2]);
    // Without a mask the new slots are causal among themselves: right for a first pass from slot
    // 0 (is_causal aligns the queries with the first keys), and a lone query needs no mask at all.
    const bool causal = !mask.defined() && t > 1;
    auto y = attention(qkv[0], keys.narrow(2, 0, length + t), values.narrow(2, 0, length + t),
                       mask.defined() ? std::optional<torch::Tensor>(mask) : std::nullopt, 0.0, causal);
    auto h = x + attn_proj(y.transpose(1, 2).reshape({B, t, d}));
    return mlp(h);
  }

  nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Projection c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};  // LoRA's targets (lora.h)

 private:
  torch::Tensor dropout(const torch::Tensor& x) { return torch::dropout(x, dropout_, is_training()); }
  torch::Tensor mlp(const torch::Tensor& h) { return h + dropout(mlp_proj(gelu_tanh(c_fc(ln_2(h))))); }

  // Causal self-attention through ATen's fused kernel (flash or memory-efficient on GPUs, the
  // flash kernel on CPUs; models/attention.h): the T x T scores are never held whole.
  torch::Tensor self_attention(const torch::Tensor& x, const torch::Tensor& mask) {
    const int64_t B = x.size(0), T = x.size(1), d = x.size(2);
    // q, k and v as three column blocks of c_attn's output, each viewed as [B, H, T, d/H]: the
    // backward's one copy is the cat of the three gradients into [B, T, 3d], the layout c_attn's
    // backward reads. (Viewed as [3, B, H, T, d/H] and unbound, the backward stacked them and
    // then copied the stack into [B, T, 3d]: ~2 ms more a layer on 2 cores.)
    const auto qkv = c_attn(x).split(d, 2);
    const auto heads = [&](const torch::Tensor& t) { return t.view({B, T, heads_, d / heads_}).transpose(1, 2); };
    auto y = attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]),
                       mask.defined() ? std::optional<torch::Tensor>(mask) : std::nullopt, is_training() ? dropout_ : 0.0,
                       /*is_causal=*/!mask.defined());
    return y.transpose(1, 2).reshape({B, T, d});
  }

  int64_t heads_;
  double dropout_;
};

// The shape from the flags, with GPT-2 small's as the defaults.
struct Shape {
  int64_t vocab, padded_vocab, positions, d, heads, layers;
};

// (gpt_padded_vocab) llm.c pads the embedding's rows to a multiple of 128 (50257 -> 50304), a layout for whole-tile
// kernels. The extra rows are never a token and never a logit: the head reads the first `vocab`
// rows, so the softmax runs over the real vocabulary (as llm.c's classifier does, and as
// Hugging Face's GPT-2 computes it: imported weights give its logits).
Shape shape_of(const ModelSpec& s) {
  const TensorField* ids = s.fields ? s.fields->find("input_ids") : nullptr;
  if (!ids || ids->dtype != DType::kI64 || ids->shape.size() != 1)
    throw usage_error("model 'gpt' reads token ids (an i64 field input_ids of one row per sample); the data gives " +
                          (s.fields ? "fields " + s.fields->text() : std::string("one tensor x")),
                      "train it on --dataset tokens (token shards, --seq_len)");
  Shape g;
  g.vocab = s.num_classes;
  g.padded_vocab = gpt_padded_vocab(g.vocab);
  const int64_t length = ids->varies() ? ids->longest : ids->shape[0];
  g.positions = s.positions > 0 ? s.positions : length;
  if (length > g.positions)
    throw usage_error(fmt::format("--seq_len {} is above the model's {} positions", length, g.positions),
                      fmt::format("a --seq_len up to {} (the weights' n_positions)", g.positions));
  if (g.vocab > g.padded_vocab) throw std::logic_error("padded vocabulary below the vocabulary");
  g.d = s.width > 0 ? s.width : 768;
  g.heads = s.heads > 0 ? s.heads : 12;
  g.layers = s.depth > 0 ? s.depth : 12;
  if (g.d % g.heads != 0)
    throw usage_error(fmt::format("gpt width {} is not a multiple of heads {}", g.d, g.heads),
                      "pick --width and --heads so that heads divides width (GPT-2 small: 768 and 12)");
  return g;
}

class Gpt : public Net {
 public:
  explicit Gpt(const ModelSpec& s) : g_(shape_of(s)), dropout_(s.dropout), checkpointing_(s.grad_checkpointing) {
    auto transformer = register_module("transformer", std::make_shared<nn::Module>());
    wte_ = transformer->register_module("wte", nn::Embedding(g_.padded_vocab, g_.d));
    wpe_ = transformer->register_module("wpe", nn::Embedding(g_.positions, g_.d));
    auto h = transformer->register_module("h", nn::ModuleList());
    for (int64_t i = 0; i < g_.layers; ++i) {
      blocks_.push_back(std::make_shared<Block>(g_.d, g_.heads, s.dropout, g_.layers));
      h->push_back(blocks_.back());
    }
    ln_f_ = transformer->register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({g_.d})));
    torch::NoGradGuard no_grad;
    wte_->weight.normal_(0, kInitStd);
    wpe_->weight.normal_(0, kInitStd);
  }

  torch::Tensor forward(torch::Tensor ids) override {
    const auto head = forward_head(ids);
    return torch::nn::functional::linear(head.hidden, head.weight);
  }

  torch::Tensor forward_batch(const Batch& b) override {
    const auto head = forward_head(b);
    return torch::nn::functional::linear(head.hidden, head.weight);
  }

  torch::Tensor forward_cached(const torch::Tensor& ids, KvCache& cache) override {
    const int64_t t = ids.size(1), length = cache.length;
    if (cache.capacity > g_.positions || length + t > cache.capacity)
      throw std::invalid_argument(fmt::format("{} more tokens after {} in a cache of {} slots (the model has {} positions)",
                                              t, length, cache.capacity, g_.positions));
    const auto [positions, mask] = cache_positions(ids, cache);
    if (cache.keys.empty()) cache.keys.resize(blocks_.size()), cache.values.resize(blocks_.size());
    auto x = wte_(ids) + wpe_(positions);
    for (size_t i = 0; i < blocks_.size(); ++i)
      x = blocks_[i]->forward_cached(x, cache.keys[i], cache.values[i], length, cache.capacity, mask);
    cache.length += t;
    return torch::nn::functional::linear(ln_f_(x), wte_->weight.narrow(0, 0, g_.vocab));
  }
  HeadInput forward_head(const Batch& b) override {
    const auto& ids = b.at("input_ids");
    return forward_head(ids, documents_of(b, ids));
  }

 private:
  HeadInput forward_head(const torch::Tensor& ids, const Documents& docs = {}) {
    const int64_t T = ids.size(1);
    if (T > g_.positions)
      throw std::invalid_argument(fmt::format("{} tokens in a sample, above the model's {} positions", T, g_.positions));
    auto x = wte_(ids) + wpe_(docs.positions.defined() ? docs.positions : torch::arange(T, ids.options()));
    x = torch::dropout(x, dropout_, is_training());
    const auto& mask = docs.mask;
    for (auto& block : blocks_) {
      if (checkpointing_ && checkpointing_active(*this))
        x = checkpoint_block(block, [b = block.get(), mask](const torch::Tensor& t) { return b->forward(t, mask); }, x);
      else
        x = block->forward(x, mask);
    }
    // The head is the token embedding (tied), its real rows: logits over the vocabulary.
    return {ln_f_(x), wte_->weight.narrow(0, 0, g_.vocab)};
  }

  Shape g_;
  double dropout_;
  bool checkpointing_;
  nn::Embedding wte_{nullptr}, wpe_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  nn::LayerNorm ln_f_{nullptr};
};

}  // namespace

int64_t gpt_padded_vocab(int64_t vocab) { return (vocab + 127) / 128 * 128; }

const Family& gpt_family() {
  static const Family f{
      .name = "gpt",
      .make = [](const ModelSpec& s) -> NetPtr { return std::make_shared<Gpt>(s); },
      .ranks = {1},
      .input = "T token ids (--dataset tokens)",
      .options = {"depth", "heads", "dropout", "positions"},
      .blocks = true,
      .named_inputs = true,
      .linear_head = true,
      // The embeddings, each block, the final norm (the head is the token embedding: tied).
      .layers = {"transformer.wte+transformer.wpe", "transformer.h.*", "transformer.ln_f"},
      .head = {"transformer.ln_f"},
      .twin = "GPT-2 as nanoGPT writes it (transformers' GPT2LMHeadModel with nn.Linear in place of Conv1D): "
              "transformer.wte/wpe, transformer.h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}, "
              "transformer.ln_f, lm_head tied to wte; the vocabulary padded to a multiple of 128"};
  return f;
}

}  // namespace gputrain
