// Hugging Face GPT-2 folders in and out (hf_gpt2.h).
#include "weights/hf_gpt2.h"

#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "weights/safetensors.h"
#include "weights/torch_save.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

constexpr const char* kHint = "give a folder that GPT2LMHeadModel.save_pretrained wrote (config.json, model.safetensors)";

// The four weights Hugging Face keeps as Conv1D ([in, out]); nn.Linear keeps [out, in].
bool is_conv1d(const std::string& name) {
  for (const char* end : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.size() > std::string(end).size() && name.compare(name.size() - std::string(end).size(), std::string::npos, end) == 0)
      return true;
  return false;
}

nlohmann::json read_json(const std::string& path) { return read_hf_json(path, kHint); }

// The shapes config.json implies for every tensor, in gputrain's names (the embedding unpadded).
std::map<std::string, std::vector<int64_t>> expected_shapes(const GptShape& g) {
  const int64_t d = g.width;
  std::map<std::string, std::vector<int64_t>> s = {{"transformer.wte.weight", {g.vocab, d}},
                                                   {"transformer.wpe.weight", {g.positions, d}},
                                                   {"transformer.ln_f.weight", {d}},
                                                   {"transformer.ln_f.bias", {d}}};
  for (int64_t i = 0; i < g.depth; ++i) {
    const std::string h = fmt::format("transformer.h.{}.", i);
    for (const char* ln : {"ln_1", "ln_2"}) {
      s[h + ln + ".weight"] = {d};
      s[h + ln + ".bias"] = {d};
    }
    s[h + "attn.c_attn.weight"] = {3 * d, d};
    s[h + "attn.c_attn.bias"] = {3 * d};
    s[h + "attn.c_proj.weight"] = {d, d};
    s[h + "attn.c_proj.bias"] = {d};
    s[h + "mlp.c_fc.weight"] = {4 * d, d};
    s[h + "mlp.c_fc.bias"] = {4 * d};
    s[h + "mlp.c_proj.weight"] = {d, 4 * d};
    s[h + "mlp.c_proj.bias"] = {d};
  }
  return s;
}

std::string dims(c10::IntArrayRef v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

}  // namespace

nlohmann::json read_hf_json(const std::string& path, const std::string& hint) {
  std::ifstream in(path);
  if (!in) throw usage_error("'" + path + "' cannot be read", hint);
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw usage_error(fmt::format("'{}' is not JSON ({})", path, e.what()), hint);
  }
}

std::string hf_model_type(const std::string& dir) {
  const nlohmann::json j = read_hf_json((fs::path(dir) / "config.json").string(), kHint);
  return j.is_object() && j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
}

std::string hf_dtype(const std::string& dir) {
  const nlohmann::json j = read_hf_json((fs::path(dir) / "config.json").string(), kHint);
  for (const char* key : {"dtype", "torch_dtype"})  // transformers 5 writes the first, 4 the second
    if (j.is_object() && j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  return "float32";
}

void make_hf_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw usage_error(fmt::format("--out '{}' cannot be made a folder ({})", dir, ec ? ec.message() : "a file is there"),
                      "give a new or existing folder");
}

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

GptShape read_hf_gpt2_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  const nlohmann::json j = read_json(path);
  if (!j.is_object() || j.value("model_type", "") != "gpt2")
    throw usage_error(fmt::format("'{}': model_type '{}' (gputrain's gpt reads GPT-2 folders: model_type gpt2)", path,
                                  j.is_object() ? j.value("model_type", "") : ""),
                      kHint);
  auto integer = [&](const char* key) -> int64_t {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
      throw usage_error(fmt::format("'{}': {} is missing or not a positive integer", path, key), kHint);
    return j[key].get<int64_t>();
  };
  GptShape g{integer("vocab_size"), integer("n_positions"), integer("n_embd"), integer("n_layer"), integer("n_head")};
  // What gputrain's gpt computes; any other variant would load and give other logits.
  std::vector<std::string> differ;
  const std::string act = j.value("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") differ.push_back("activation_function '" + act + "' (gelu_new)");
  if (j.contains("n_inner") && !j["n_inner"].is_null() && j["n_inner"] != 4 * g.width)
    differ.push_back(fmt::format("n_inner {} (null or 4 x n_embd)", j["n_inner"].dump()));
  if (j.contains("layer_norm_epsilon") && j["layer_norm_epsilon"].is_number() &&
      std::abs(j["layer_norm_epsilon"].get<double>() - 1e-5) > 1e-12)
    differ.push_back(fmt::format("layer_norm_epsilon {} (1e-05)", j["layer_norm_epsilon"].dump()));
  if (!j.value("tie_word_embeddings", true)) differ.push_back("tie_word_embeddings false (true)");
  if (!j.value("scale_attn_weights", true)) differ.push_back("scale_attn_weights false (true)");
  if (j.value("scale_attn_by_inverse_layer_idx", false)) differ.push_back("scale_attn_by_inverse_layer_idx true (false)");
  if (!differ.empty())
    throw usage_error(fmt::format("'{}': a GPT-2 variant gputrain's gpt does not compute: {}", path, fmt::join(differ, ", ")),
                      "gputrain's gpt is GPT-2 as released: tanh GELU, tied head, LayerNorm epsilon 1e-5");
  if (g.width % g.heads != 0)
    throw usage_error(fmt::format("'{}': n_embd {} is not a multiple of n_head {}", path, g.width, g.heads), kHint);
  return g;
}

std::vector<std::pair<std::string, torch::Tensor>> read_hf_gpt2_weights(const std::string& dir, const GptShape& shape,
                                                                      int64_t padded_vocab) {
  const fs::path folder(dir);
  std::vector<std::pair<std::string, torch::Tensor>> file;
  if (fs::exists(folder / "model.safetensors")) {
    for (auto& [name, t] : load_safetensors((folder / "model.safetensors").string())) file.emplace_back(name, t);
  } else if (fs::exists(folder / "pytorch_model.bin")) {
    file = read_torch_save((folder / "pytorch_model.bin").string(), false).tensors;
  } else {
    throw usage_error("'" + dir + "' holds no model.safetensors or pytorch_model.bin", kHint);
  }
  const auto expected = expected_shapes(shape);
  std::map<std::string, torch::Tensor> out;
  for (auto& [raw, t] : file) {
    std::string name = raw;
    if (name.rfind("transformer.", 0) != 0 && name != "lm_head.weight") name = "transformer." + name;  // GPT2Model's
    // Old files keep the causal mask as buffers; a tied lm_head is wte again.
    if (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")) continue;
    if (name == "lm_head.weight") continue;  // compared with wte below
    auto it = expected.find(name);
    if (it == expected.end())
      throw usage_error(fmt::format("'{}': tensor '{}' is not part of GPT-2", dir, name), kHint);
    torch::Tensor w = is_conv1d(name) ? t.t().contiguous() : t;
    if (w.sizes().vec() != it->second)
      throw usage_error(fmt::format("'{}': '{}' has shape {}, config.json implies {}", dir, raw,
                                    dims(t.sizes()), dims(is_conv1d(name) ? c10::IntArrayRef({it->second[1], it->second[0]})
                                                                           : c10::IntArrayRef(it->second))),
                        "the weights and config.json come from different models");
    out[name] = w.to(torch::kFloat);
  }
  for (const auto& [name, dims_] : expected)
    if (!out.count(name)) throw usage_error(fmt::format("'{}': '{}' is missing", dir, name), kHint);
  for (const auto& [raw, t] : file)
    if (raw == "lm_head.weight" && !torch::equal(t.to(torch::kFloat), out["transformer.wte.weight"]))
      throw usage_error("'" + dir + "': lm_head.weight differs from transformer.wte.weight (an untied head)",
                        "gputrain's gpt ties its head to the token embedding, as GPT-2 does");
  auto& wte = out["transformer.wte.weight"];
  if (padded_vocab > shape.vocab)
    wte = torch::cat({wte, torch::zeros({padded_vocab - shape.vocab, shape.width}, wte.options())});
  std::vector<std::pair<std::string, torch::Tensor>> named(out.begin(), out.end());
  return named;
}

void write_hf_gpt2(const std::string& dir, const std::vector<std::pair<std::string, torch::Tensor>>& weights,
                   const GptShape& shape, const std::string& tokenizer) {
  make_hf_folder(dir);
  NamedTensors out;
  const auto expected = expected_shapes(shape);
  for (const auto& [name, t] : weights) {
    if (!expected.count(name)) continue;  // nothing else belongs to GPT-2
    torch::Tensor w = t.detach().to(torch::kCPU, torch::kFloat);
    if (name == "transformer.wte.weight") w = w.narrow(0, 0, shape.vocab);
    if (is_conv1d(name)) w = w.t();
    out.emplace_back(name, w.contiguous());
    if (name == "transformer.wte.weight") out.emplace_back("lm_head.weight", w.clone());
  }
  if (out.size() != expected.size() + 1)
    throw std::logic_error(fmt::format("write_hf_gpt2: {} of {} tensors", out.size(), expected.size() + 1));
  nlohmann::json config = {{"architectures", {"GPT2LMHeadModel"}},
                           {"model_type", "gpt2"},
                           {"vocab_size", shape.vocab},
                           {"n_positions", shape.positions},
                           {"n_embd", shape.width},
                           {"n_layer", shape.depth},
                           {"n_head", shape.heads},
                           {"n_inner", nullptr},
                           {"activation_function", "gelu_new"},
                           {"layer_norm_epsilon", 1e-5},
                           {"initializer_range", 0.02},
                           {"resid_pdrop", 0.0},
                           {"embd_pdrop", 0.0},
                           {"attn_pdrop", 0.0},
                           {"tie_word_embeddings", true},
                           {"torch_dtype", "float32"}};
  if (!tokenizer.empty()) {
    const nlohmann::json tok = read_json(tokenizer);
    if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
      for (const auto& t : tok["added_tokens"])
        if (t.value("content", "") == "<|endoftext|>" && t.contains("id")) config["bos_token_id"] = config["eos_token_id"] = t["id"];
    copy_file_atomically(tokenizer, (fs::path(dir) / "tokenizer.json").string());
  }
  save_safetensors((fs::path(dir) / "model.safetensors").string(), out, {{"format", "pt"}});
  write_file_atomically((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
}

}  // namespace gputrain
