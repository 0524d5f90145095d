// llama: the decoder of Llama 2 and 3, SmolLM and TinyLlama, as Hugging Face's LlamaForCausalLM
// computes it. Token embedding, pre-norm blocks (RMSNorm -> causal self-attention with rotary
// positions and grouped-query heads -> residual, RMSNorm -> SwiGLU MLP -> residual), a final
// RMSNorm and a head (tied to the embedding or not). No biases. Parameter names are Hugging
// Face's, so its folders load and export without renaming (weights/hf_llama.cpp).
#include <cmath>

#include <fmt/format.h>
#include <torch/nn.h>

#include "core/error.h"
#include "data/schema.h"
#include "models/attention.h"
#include "models/checkpoint_block.h"
#include "models/documents.h"
#include "models/family.h"
#include "models/llama.h"
#include "models/lora.h"
#include "models/registry.h"

namespace gputrain {
namespace {

namespace nn = torch::nn;

// Hugging Face's initializer_range: every Linear and the embedding N(0, 0.02), norms ones.
constexpr double kInitStd = 0.02;

struct Shape {
  int64_t vocab, positions, d, heads, kv_heads, head_dim, mlp, layers;
  double theta, eps;
  std::vector<double> scaling;
  bool tied;
};

Shape shape_of(const ModelSpec& s) {
  const TensorField* ids = s.fields ? s.fields->find("input_ids") : nullptr;
  if (!ids || ids->dtype != DType::kI64 || ids->shape.size() != 1)
    throw usage_error("model 'llama' reads token ids (an i64 field input_ids of one row per sample); the data gives " +
                          (s.fields ? "fields " + s.fields->text() : std::string("one tensor x")),
                      "train it on --dataset tokens (token shards, --seq_len)");
  Shape g;
  g.vocab = s.num_classes;
  const int64_t length = ids->varies() ? ids->longest : ids->shape[0];
  g.positions = s.positions > 0 ? s.positions : length;
  if (length > g.positions)
    throw usage_error(fmt::format("--seq_len {} is above the model's {} positions", length, g.positions),
                      fmt::format("a --seq_len up to {} (the weights' max_position_embeddings)", g.positions));
  g.d = s.width > 0 ? s.width : 768;
  g.heads = s.heads > 0 ? s.heads : 12;
  g.kv_heads = s.kv_heads > 0 ? s.kv_heads : g.heads;
  g.layers = s.depth > 0 ? s.depth : 12;
  g.mlp = s.mlp_width > 0 ? s.mlp_width : llama_mlp_width(g.d);
  g.theta = s.rope_theta > 0 ? s.rope_theta : kLlamaRopeTheta;
  g.eps = s.norm_eps > 0 ? s.norm_eps : kLlamaNormEps;
  g.scaling = s.rope_scaling;
  g.tied = s.tie_embeddings;
  if (g.d % g.heads != 0 || (g.d / g.heads) % 2 != 0)
    throw usage_error(fmt::format("llama width {} is not heads {} x an even head width", g.d, g.heads),
                      "pick --width and --heads so that width / heads is even (Llama 3 8B: 4096 and 32)");
  if (g.heads % g.kv_heads != 0)
    throw usage_error(fmt::format("llama --kv_heads {} does not divide --heads {}", g.kv_heads, g.heads),
                      "each key/value head serves a whole group of query heads (Llama 3 8B: 8 of 32)");
  g.head_dim = g.d / g.heads;
  return g;
}

// x / RMS(x) x weight, in float32 whatever x is, then back to x's dtype before the weight
// multiplies it (as LlamaRMSNorm, so bf16 runs round where Hugging Face's do).
class RmsNorm : public nn::Module {
 public:
  RmsNorm(int64_t d, double eps) : eps_(eps) { weight = register_parameter("weight", torch::ones({d})); }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto h = x.to(torch::kFloat);
    return weight * (h * torch::rsqrt(h.pow(2).mean(-1, true) + eps_)).to(x.scalar_type());
  }
  torch::Tensor weight;

 private:
  double eps_;
};

// Rotary positions in the rotate-half convention: the first and second halves of each head's
// features are the pairs that turn, by position x frequency.
class Rotary {
 public:
  Rotary(int64_t head_dim, double theta, const std::vector<double>& scaling) {
    auto inv = 1.0 / torch::pow(theta, torch::arange(0, head_dim, 2, torch::kLong).to(torch::kFloat) / head_dim);
    if (!scaling.empty()) inv = llama3_scaled(inv, scaling);
    inv_freq_ = inv;
  }

  // cos and sin [B or 1, 1, T, head_dim] for positions [B or 1, T], in `dtype` (float32 math).
  std::pair<torch::Tensor, torch::Tensor> at(const torch::Tensor& positions, c10::ScalarType dtype) {
    if (inv_freq_.device() != positions.device()) inv_freq_ = inv_freq_.to(positions.device());
    const auto freqs = positions.to(torch::kFloat).unsqueeze(-1) * inv_freq_;
    const auto emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);
    return {emb.cos().to(dtype), emb.sin().to(dtype)};
  }

  static torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
    const int64_t half = x.size(-1) / 2;
    const auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    return x * cos + rotated * sin;
  }

 private:
  // Llama 3's rope_scaling: long wavelengths slowed by `factor`, short ones kept, those between
  // blended (the frequencies Llama 3.1 and later were trained with).
  static torch::Tensor llama3_scaled(const torch::Tensor& inv, const std::vector<double>& s) {
    const double factor = s[0], low = s[1], high = s[2], original = s[3];
    const auto wavelen = 2 * M_PI / inv;
    auto out = torch::where(wavelen > original / low, inv / factor, inv);
    const auto smooth = (original / wavelen - low) / (high - low);
    const auto blended = (1 - smooth) * out / factor + smooth * out;
    const auto medium = (wavelen >= original / high).logical_and(wavelen <= original / low);
    return torch::where(medium, blended, out);
  }

  torch::Tensor inv_freq_;
};

class Block : public nn::Module {
 public:
  Block(const Shape& g, double dropout) : g_(g), dropout_(dropout) {
    input_layernorm = register_module("input_layernorm", std::make_shared<RmsNorm>(g.d, g.eps));
    auto attn = register_module("self_attn", std::make_shared<nn::Module>());
    const auto linear = [](int64_t in, int64_t out) { return Projection(in, out, false); };
    q_proj = attn->register_module("q_proj", linear(g.d, g.heads * g.head_dim));
    k_proj = attn->register_module("k_proj", linear(g.d, g.kv_heads * g.head_dim));
    v_proj = attn->register_module("v_proj", linear(g.d, g.kv_heads * g.head_dim));
    o_proj = attn->register_module("o_proj", linear(g.heads * g.head_dim, g.d));
    post_attention_layernorm = register_module("post_attention_layernorm", std::make_shared<RmsNorm>(g.d, g.eps));
    auto mlp = register_module("mlp", std::make_shared<nn::Module>());
    gate_proj = mlp->register_module("gate_proj", linear(g.d, g.mlp));
    up_proj = mlp->register_module("up_proj", linear(g.d, g.mlp));
    down_proj = mlp->register_module("down_proj", linear(g.mlp, g.d));
    torch::NoGradGuard no_grad;
    for (auto* l : {&q_proj, &k_proj, &v_proj, &o_proj, &gate_proj, &up_proj, &down_proj}) (*l)->weight.normal_(0, kInitStd);
  }

  // x [B, T, d] at rotary angles cos/sin. With a cache: the T new slots follow `length` slots in
  // keys/values [B, kv_heads, capacity, head_dim], which they extend; `mask` as gpt's.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        torch::Tensor* keys = nullptr, torch::Tensor* values = nullptr, int64_t length = 0,
                        int64_t capacity = 0, const torch::Tensor& mask = {}) {
    const int64_t B = x.size(0), T = x.size(1);
    const auto h = input_layernorm->forward(x);
    auto q = Rotary::apply(q_proj(h).view({B, T, g_.heads, g_.head_dim}).transpose(1, 2), cos, sin);
    auto k = Rotary::apply(k_proj(h).view({B, T, g_.kv_heads, g_.head_dim}).transpose(1, 2), cos, sin);
    auto v = v_proj(h).view({B, T, g_.kv_heads, g_.head_dim}).transpose(1, 2);
    if (keys) {  // the cache keeps the key/value heads, before they are repeated for their groups
      if (!keys->defined()) {
        *keys = torch::zeros({B, g_.kv_heads, capacity, g_.head_dim}, k.options());
        *values = torch::zeros_like(*keys);
      }
      keys->narrow(2, length, T).copy_(k);
      values->narrow(2, length, T).copy_(v);
      k = keys->narrow(2, 0, length + T);
      v = values->narrow(2, 0, length + T);
    }
    const bool causal = !mask.defined() && T > 1;
    const auto attend = [&](const torch::Tensor& query, const torch::Tensor& key, const torch::Tensor& value) {
      return attention(query, key, value, mask.defined() ? std::optional<torch::Tensor>(mask) : std::nullopt,
                       is_training() ? dropout_ : 0.0, causal);
    };
    const int64_t group = g_.heads / g_.kv_heads;
    torch::Tensor y;
    if (group > 1 && T == 1) {
      // Decoding: a key/value head's query heads become its rows of queries, which see the same
      // keys, so the cache is read as it is instead of copied group times at every token.
      y = attend(q.reshape({B, g_.kv_heads, group, g_.head_dim}), k, v).reshape({B, g_.heads, 1, g_.head_dim});
    } else {
      // Each key/value head serves heads / kv_heads query heads in a row (Hugging Face's repeat_kv).
      if (group > 1) {
        k = k.repeat_interleave(group, 1);
        v = v.repeat_interleave(group, 1);
      }
      y = attend(q, k, v);
    }
    const auto r = x + o_proj(y.transpose(1, 2).reshape({B, T, g_.heads * g_.head_dim}));
    const auto m = post_attention_layernorm->forward(r);
    return r + down_proj(torch::silu(gate_proj(m)) * up_proj(m));
  }

  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  // LoRA's targets (lora.h).
  Projection q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  Projection gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  Shape g_;
  double dropout_;
};

class Llama : public Net {
 public:
  explicit Llama(const ModelSpec& s)
      : g_(shape_of(s)), rotary_(g_.head_dim, g_.theta, g_.scaling), checkpointing_(s.grad_checkpointing) {
    auto model = register_module("model", std::make_shared<nn::Module>());
    embed_tokens_ = model->register_module("embed_tokens", nn::Embedding(g_.vocab, g_.d));
    auto layers = model->register_module("layers", nn::ModuleList());
    for (int64_t i = 0; i < g_.layers; ++i) {
      blocks_.push_back(std::make_shared<Block>(g_, s.dropout));
      layers->push_back(blocks_.back());
    }
    norm_ = model->register_module("norm", std::make_shared<RmsNorm>(g_.d, g_.eps));
    torch::NoGradGuard no_grad;
    embed_tokens_->weight.normal_(0, kInitStd);
    if (!g_.tied) {
      lm_head_ = register_module("lm_head", Projection(g_.d, g_.vocab, false, /*lora_target=*/false));
      lm_head_->weight.normal_(0, kInitStd);
    }
  }

  torch::Tensor forward(torch::Tensor ids) override {
    const auto head = forward_head(ids);
    return torch::nn::functional::linear(head.hidden, head.weight);
  }
  torch::Tensor forward_batch(const Batch& b) override {
    const auto head = forward_head(b);
    return torch::nn::functional::linear(head.hidden, head.weight);
  }
  HeadInput forward_head(const Batch& b) override {
    const auto& ids = b.at("input_ids");
    return forward_head(ids, documents_of(b, ids));
  }

  torch::Tensor forward_cached(const torch::Tensor& ids, KvCache& cache) override {
    const int64_t t = ids.size(1), length = cache.length;
    if (cache.capacity > g_.positions || length + t > cache.capacity)
      throw std::invalid_argument(fmt::format("{} more tokens after {} in a cache of {} slots (the model has {} positions)",
                                              t, length, cache.capacity, g_.positions));
    const auto [positions, mask] = cache_positions(ids, cache);
    if (cache.keys.empty()) cache.keys.resize(blocks_.size()), cache.values.resize(blocks_.size());
    auto x = embed_tokens_(ids);
    const auto [cos, sin] = rotary_.at(positions, x.scalar_type());
    for (size_t i = 0; i < blocks_.size(); ++i)
      x = blocks_[i]->forward(x, cos, sin, &cache.keys[i], &cache.values[i], length, cache.capacity, mask);
    cache.length += t;
    const auto h = norm_->forward(x);
    return g_.tied ? torch::nn::functional::linear(h, head_weight()) : lm_head_->forward(h);
  }

 private:
  HeadInput forward_head(const torch::Tensor& ids, Documents docs = {}) {
    const int64_t T = ids.size(1);
    if (T > g_.positions)
      throw std::invalid_argument(fmt::format("{} tokens in a sample, above the model's {} positions", T, g_.positions));
    auto x = embed_tokens_(ids);
    if (!docs.positions.defined()) docs.positions = torch::arange(T, ids.options()).unsqueeze(0);
    // The angles in the hidden states' dtype, as Hugging Face's (float32 under autocast too).
    const auto [cos, sin] = rotary_.at(docs.positions, x.scalar_type());
    const auto& mask = docs.mask;
    for (auto& block : blocks_) {
      if (checkpointing_ && checkpointing_active(*this))
        x = checkpoint_block(
            block, [b = block.get(), c = cos, s = sin, mask](const torch::Tensor& t) { return b->forward(t, c, s, nullptr, nullptr, 0, 0, mask); },
            x);
      else
        x = block->forward(x, cos, sin, nullptr, nullptr, 0, 0, mask);
    }
    return {norm_->forward(x), head_weight()};
  }

  torch::Tensor head_weight() const { return g_.tied ? embed_tokens_->weight : lm_head_->weight; }

  Shape g_;
  Rotary rotary_;
  bool checkpointing_;
  nn::Embedding embed_tokens_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<RmsNorm> norm_;
  Projection lm_head_{nullptr};  // not LoRA's: the head of a fine-tune stays as pretrained
};

}  // namespace

int64_t llama_mlp_width(int64_t width) {
  // Llama's rule: 2/3 of 4 x width for the two SwiGLU inputs, rounded up to a multiple of 256.
  return (8 * width / 3 + 255) / 256 * 256;
}

const Family& llama_family() {
  static const Family f{
      .name = "llama",
      .make = [](const ModelSpec& s) -> NetPtr { return std::make_shared<Llama>(s); },
      .ranks = {1},
      .input = "T token ids (--dataset tokens)",
      .options = {"depth", "heads", "dropout", "positions", "kv_heads"},
      .blocks = true,
      .named_inputs = true,
      .linear_head = true,
      .layers = {"model.embed_tokens", "model.layers.*", "model.norm"},
      .head = {"model.norm", "lm_head"},
      .twin = "transformers' LlamaForCausalLM: model.embed_tokens, model.layers.N.{input_layernorm,"
              "self_attn.{q,k,v,o}_proj,post_attention_layernorm,mlp.{gate,up,down}_proj}, model.norm, lm_head "
              "(absent when tied)"};
  return f;
}

}  // namespace gputrain
