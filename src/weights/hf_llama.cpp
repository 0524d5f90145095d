// Hugging Face Llama folders in and out (hf_llama.h).
#include "weights/hf_llama.h"

#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "text/token_decoder.h"
#include "weights/hf_weights.h"
#include "weights/safetensors.h"
#include "weights/torch_save.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

constexpr const char* kHint =
    "give a folder that LlamaForCausalLM.save_pretrained wrote (config.json, model.safetensors or its sharded index)";

// The shapes config.json implies for every tensor.
std::map<std::string, std::vector<int64_t>> expected_shapes(const LlamaShape& s) {
  const int64_t d = s.base.width, hd = d / s.base.heads;
  std::map<std::string, std::vector<int64_t>> e = {{"model.embed_tokens.weight", {s.base.vocab, d}},
                                                   {"model.norm.weight", {d}}};
  if (!s.tied) e["lm_head.weight"] = {s.base.vocab, d};
  for (int64_t i = 0; i < s.base.depth; ++i) {
    const std::string l = fmt::format("model.layers.{}.", i);
    e[l + "input_layernorm.weight"] = {d};
    e[l + "post_attention_layernorm.weight"] = {d};
    e[l + "self_attn.q_proj.weight"] = {s.base.heads * hd, d};
    e[l + "self_attn.k_proj.weight"] = {s.kv_heads * hd, d};
    e[l + "self_attn.v_proj.weight"] = {s.kv_heads * hd, d};
    e[l + "self_attn.o_proj.weight"] = {d, s.base.heads * hd};
    e[l + "mlp.gate_proj.weight"] = {s.mlp_width, d};
    e[l + "mlp.up_proj.weight"] = {s.mlp_width, d};
    e[l + "mlp.down_proj.weight"] = {d, s.mlp_width};
  }
  return e;
}


}  // namespace

namespace {

LlamaShape read_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  const nlohmann::json j = read_hf_json(path, kHint);
  if (!j.is_object() || j.value("model_type", "") != "llama")
    throw usage_error(fmt::format("'{}': model_type '{}' (gputrain's llama reads Llama folders: model_type llama)", path,
                                  j.is_object() ? j.value("model_type", "") : ""),
                      kHint);
  auto integer = [&](const char* key) -> int64_t {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
      throw usage_error(fmt::format("'{}': {} is missing or not a positive integer", path, key), kHint);
    return j[key].get<int64_t>();
  };
  LlamaShape s;
  s.base = {integer("vocab_size"), integer("max_position_embeddings"), integer("hidden_size"), integer("num_hidden_layers"),
            integer("num_attention_heads")};
  s.kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null() ? integer("num_key_value_heads")
                                                                                         : s.base.heads;
  s.mlp_width = integer("intermediate_size");
  const auto number = [&](const char* key, double fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number() || j[key].get<double>() <= 0)
      throw usage_error(fmt::format("'{}': {} is not a positive number", path, key), kHint);
    return j[key].get<double>();
  };
  // transformers 5 writes rope_parameters {rope_theta, rope_type, ...}; earlier files rope_theta
  // and rope_scaling {rope_type or type, ...}.
  const nlohmann::json none;
  const nlohmann::json& params = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? j["rope_parameters"] : none;
  nlohmann::json rope = params.is_object() ? params : j.value("rope_scaling", nlohmann::json());
  if (params.is_object() && params.value("rope_type", "default") == "default") rope = nullptr;
  const nlohmann::json theta = params.is_object() ? params.value("rope_theta", nlohmann::json()) : j.value("rope_theta", none);
  if (!theta.is_null() && (!theta.is_number() || theta.get<double>() <= 0))
    throw usage_error(fmt::format("'{}': rope_theta is not a positive number", path), kHint);
  s.rope_theta = theta.is_null() ? 10000.0 : theta.get<double>();
  s.norm_eps = number("rms_norm_eps", 1e-6);
  s.tied = j.value("tie_word_embeddings", false);
  // What gputrain's llama computes; any other variant would load and give other logits.
  std::vector<std::string> differ;
  if (j.value("hidden_act", "silu") != "silu") differ.push_back("hidden_act '" + j.value("hidden_act", "") + "' (silu)");
  if (j.value("attention_bias", false)) differ.push_back("attention_bias true (false)");
  if (j.value("mlp_bias", false)) differ.push_back("mlp_bias true (false)");
  if (j.value("pretraining_tp", 1) != 1) differ.push_back("pretraining_tp " + j["pretraining_tp"].dump() + " (1)");
  if (s.base.width % s.base.heads != 0 || (s.base.width / s.base.heads) % 2 != 0)
    differ.push_back(fmt::format("hidden_size {} over {} heads (an even head width)", s.base.width, s.base.heads));
  else if (j.contains("head_dim") && !j["head_dim"].is_null() && j["head_dim"] != s.base.width / s.base.heads)
    differ.push_back(fmt::format("head_dim {} (hidden_size / num_attention_heads = {})", j["head_dim"].dump(),
                                 s.base.width / s.base.heads));
  if (s.base.heads % s.kv_heads != 0)
    differ.push_back(fmt::format("num_key_value_heads {} (a divisor of num_attention_heads {})", s.kv_heads, s.base.heads));
  if (!rope.is_null()) {
    const nlohmann::json& r = rope;
    const std::string type = r.is_object() ? r.value("rope_type", r.value("type", "")) : "";
    const auto field = [&](const char* key) { return r.contains(key) && r[key].is_number() ? r[key].get<double>() : 0.0; };
    s.rope_scaling = {field("factor"), field("low_freq_factor"), field("high_freq_factor"),
                      field("original_max_position_embeddings")};
    if (type != "llama3" || s.rope_scaling[0] < 1 || s.rope_scaling[1] <= 0 || s.rope_scaling[2] <= s.rope_scaling[1] ||
        s.rope_scaling[3] < 1)
      differ.push_back((params.is_object() ? "rope_parameters " : "rope_scaling ") + r.dump() +
                       " (none, or Llama 3's: rope_type llama3 with its four numbers)");
  }
  if (!differ.empty())
    throw usage_error(fmt::format("'{}': a Llama variant gputrain's llama does not compute: {}", path, fmt::join(differ, ", ")),
                      "gputrain's llama is Llama 2/3 as released: SiLU, no biases, rotary positions (Llama 3's scaling)");
  return s;
}

}  // namespace

LlamaShape read_hf_llama_config(const std::string& dir) {
  try {
    return read_config(dir);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
    throw usage_error(fmt::format("'{}/config.json' is not a Llama config gputrain can read ({})", dir, e.what()), kHint);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> read_hf_llama_weights(const std::string& dir, const LlamaShape& shape) {
  const auto file = read_hf_weights(dir);
  const auto expected = expected_shapes(shape);
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, t] : file) {
    if (name.ends_with(".rotary_emb.inv_freq")) continue;  // old files keep the angles, which config.json decides
    if (name == "lm_head.weight" && shape.tied) continue;  // compared with the embedding below
    const auto it = expected.find(name);
    if (it == expected.end()) throw usage_error(fmt::format("'{}': tensor '{}' is not part of this Llama", dir, name), kHint);
    if (t.sizes().vec() != it->second)
      throw usage_error(fmt::format("'{}': '{}' has shape [{}], config.json implies [{}]", dir, name,
                                    fmt::join(t.sizes(), ", "), fmt::join(it->second, ", ")),
                        "the weights and config.json come from different models");
    out[name] = t.to(torch::kFloat);
  }
  for (const auto& [name, dims] : expected)
    if (!out.count(name)) throw usage_error(fmt::format("'{}': '{}' is missing", dir, name), kHint);
  for (const auto& [name, t] : file)
    if (name == "lm_head.weight" && shape.tied && !torch::equal(t.to(torch::kFloat), out["model.embed_tokens.weight"]))
      throw usage_error("'" + dir + "': lm_head.weight differs from model.embed_tokens.weight, and config.json ties them",
                        "set tie_word_embeddings to false in config.json if the head is its own");
  return {out.begin(), out.end()};
}

void write_hf_llama(const std::string& dir, const std::vector<std::pair<std::string, torch::Tensor>>& weights,
                    const LlamaShape& shape, const std::string& tokenizer) {
  make_hf_folder(dir);
  NamedTensors out;
  const auto expected = expected_shapes(shape);
  for (const auto& [name, t] : weights)
    if (expected.count(name)) out.emplace_back(name, t.detach().to(torch::kCPU, torch::kFloat).contiguous());
  if (out.size() != expected.size())
    throw std::logic_error(fmt::format("write_hf_llama: {} of {} tensors", out.size(), expected.size()));
  const LlamaShape& s = shape;
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                           {"model_type", "llama"},
                           {"vocab_size", s.base.vocab},
                           {"hidden_size", s.base.width},
                           {"intermediate_size", s.mlp_width},
                           {"num_hidden_layers", s.base.depth},
                           {"num_attention_heads", s.base.heads},
                           {"num_key_value_heads", s.kv_heads},
                           {"head_dim", s.base.width / s.base.heads},
                           {"max_position_embeddings", s.base.positions},
                           {"hidden_act", "silu"},
                           {"rms_norm_eps", s.norm_eps},
                           {"rope_theta", s.rope_theta},
                           {"rope_scaling", nullptr},
                           {"attention_bias", false},
                           {"mlp_bias", false},
                           {"attention_dropout", 0.0},
                           {"initializer_range", 0.02},
                           {"tie_word_embeddings", s.tied},
                           {"bos_token_id", nullptr},
                           {"eos_token_id", nullptr},
                           {"torch_dtype", "float32"}};
  if (!s.rope_scaling.empty())
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", s.rope_scaling[0]},
                              {"low_freq_factor", s.rope_scaling[1]},
                              {"high_freq_factor", s.rope_scaling[2]},
                              {"original_max_position_embeddings", static_cast<int64_t>(s.rope_scaling[3])}};
  if (!tokenizer.empty()) {
    if (const int64_t eot = TokenDecoder::load(tokenizer).end_of_text(); eot >= 0)
      config["bos_token_id"] = config["eos_token_id"] = eot;
    copy_file_atomically(tokenizer, (fs::path(dir) / "tokenizer.json").string());
  }
  save_safetensors((fs::path(dir) / "model.safetensors").string(), out, {{"format", "pt"}});
  write_file_atomically((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
}

}  // namespace gputrain
