// --init_from: reading a weights file of any format, matching its names and shapes to the
// model's, and saying what was loaded, skipped and left at its initial values.
#include "train/init_from.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/text.h"
#include "models/gpt.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "weights/hf_weights.h"
#include "weights/safetensors.h"
#include "weights/torch_save.h"
#include "weights/unpickler.h"

namespace gputrain {
namespace {

// Wrappers' prefixes, removed while every name has one: DataParallel/DDP ("module."),
// Lightning and many trainers ("model."), torch.compile ("_orig_mod.").
const std::vector<std::string> kPrefixes = {"module.", "model.", "_orig_mod."};

std::string shape_text(const torch::Tensor& t) {
  if (t.dim() == 0) return "scalar";
  std::vector<std::string> d;
  for (auto s : t.sizes()) d.push_back(std::to_string(s));
  return join(d, "x");
}

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

}  // namespace

namespace {

// A nanoGPT checkpoint's model_args as gpt's shape. Its vocab_size is its embedding's rows, which
// nanoGPT pads itself (50304 for GPT-2's 50257): not the data's vocabulary, so left at 0.
GptShape nanogpt_shape(const std::map<std::string, int64_t>& args, const std::string& path) {
  auto arg = [&](const char* name) {
    const auto it = args.find(name);
    if (it == args.end() || it->second <= 0)
      throw usage_error(fmt::format("{}: its model_args have no {} (a nanoGPT checkpoint names n_layer, n_head, "
                                    "n_embd, block_size and vocab_size)",
                                    path, name),
                        "pass a checkpoint that nanoGPT's train.py wrote, or its model's state_dict alone");
    return it->second;
  };
  if (const auto bias = args.find("bias"); bias != args.end() && bias->second == 0)
    throw usage_error(path + ": a nanoGPT model with bias=False (no biases in its linear layers and LayerNorms), "
                             "which gpt's GPT-2 layers have",
                      "train the nanoGPT model with bias=True, as GPT-2 has them");
  GptShape g;
  g.depth = arg("n_layer");
  g.heads = arg("n_head");
  g.width = arg("n_embd");
  g.positions = arg("block_size");
  arg("vocab_size");
  return g;
}

// What a PyTorch GPT-2 saves beyond gpt's parameters: the head tied to the token embedding (the
// same tensor under a second name: kept once, if it is the same), and nanoGPT's causal-mask
// buffers (gpt asks the attention kernel for causality instead). nanoGPT's embedding has its own
// padded row count: its rows are padded with zeros to a multiple of 128 (the head reads the
// data's vocabulary only).
void drop_gpt_extras(InitWeights& w) {
  const torch::Tensor* wte = nullptr;
  for (const auto& [name, t] : w.tensors)
    if (name == "transformer.wte.weight") wte = &t;
  std::vector<std::pair<std::string, torch::Tensor>> kept;
  for (auto& [name, t] : w.tensors) {
    if (name == "lm_head.weight" && wte) {
      if (!t.is_meta() && !wte->is_meta() && !(t.sizes() == wte->sizes() && torch::equal(t, *wte)))
        throw usage_error(w.path + ": lm_head.weight is not transformer.wte.weight: an untied head, which gpt's "
                                   "GPT-2 (one tensor for both) cannot hold",
                          "start from a GPT-2 whose head is tied to its token embedding");
      continue;
    }
    if (name.size() > 10 && name.compare(name.size() - 10, 10, ".attn.bias") == 0 && t.dim() == 4) continue;
    kept.emplace_back(name, t);
  }
  w.tensors = std::move(kept);
  if (w.format != "nanoGPT checkpoint") return;
  for (auto& [name, t] : w.tensors)
    if (name == "transformer.wte.weight" && t.size(0) % 128 != 0)
      t = torch::cat({t, torch::zeros({gpt_padded_vocab(t.size(0)) - t.size(0), t.size(1)}, t.options())});
}

// A weights file, by its bytes: safetensors, a torch.save state_dict (or a nanoGPT checkpoint),
// a gputrain checkpoint.
void read_weights_file(InitWeights& w, const Family& f, bool ema) {
  const std::string& path = w.path;
  const MappedFile m = map_file(path);
  auto no_ema = [&](const char* what) {
    return usage_error(fmt::format("--init_ema: '{}' is {}, which holds one set of weights", path, what),
                       "drop --init_ema, or pass a gputrain checkpoint of a run with --ema_decay");
  };
  switch (detect_weights_format(path, m)) {
    case WeightsFormat::Safetensors: {
      if (ema) throw no_ema("a safetensors file");
      w.format = "safetensors";
      for (auto& [name, t] : load_safetensors(path)) w.tensors.emplace_back(name, t);
      break;
    }
    case WeightsFormat::TorchSave: {
      StateDict s = read_torch_save(path, ema);
      w.format = "torch.save";
      w.wrapper = s.wrapper;
      w.tensors = std::move(s.tensors);
      if (!s.model_args.empty() && f.name == "gpt") {
        w.gpt = nanogpt_shape(s.model_args, path);
        w.shape_from = path + "'s model_args";
        w.format = "nanoGPT checkpoint";
      }
      break;
    }
    case WeightsFormat::GputrainCheckpoint: {
      CheckpointWeights c = read_checkpoint_weights(path);
      if (ema && c.ema.empty())
        throw usage_error(fmt::format("--init_ema: checkpoint '{}' has no moving average (its run had no --ema_decay)", path),
                          "drop --init_ema to start from its weights");
      w.format = ema ? "gputrain checkpoint, EMA weights" : "gputrain checkpoint";
      w.tensors = ema ? std::move(c.ema) : std::move(c.raw);
      break;
    }
    case WeightsFormat::TorchScript:
      throw usage_error(path + ": a TorchScript module (torch.jit.save), not a weights file",
                        "save its weights in Python: torch.save(torch.jit.load(PATH).state_dict(), 'weights.pt')");
    case WeightsFormat::LegacyTorchSave:
      throw usage_error(path + ": torch.save's legacy format (PyTorch before 1.6, or _use_new_zipfile_serialization=False)",
                        "re-save it with a current PyTorch: torch.save(torch.load(PATH, weights_only=True), 'weights.pt')");
    case WeightsFormat::Unknown:
      throw usage_error(path + ": not a weights file (neither safetensors nor a torch.save or gputrain zip)", kWeightsHint);
  }
}

}  // namespace

InitWeights read_init_weights(const std::string& path, const Family& f, bool ema) {
  InitWeights w;
  w.path = path;
  // A model from a file (a program exported from transformers, say) takes a Hugging Face
  // folder's weights by their own names: the folder, or the index of its shards.
  const std::string index_name = "model.safetensors.index.json";
  const bool index = path.size() >= index_name.size() && path.compare(path.size() - index_name.size(), index_name.size(), index_name) == 0;
  if (!f.width && (index || is_hf_folder(path))) {
    if (ema) throw usage_error("--init_ema: '" + path + "' is a Hugging Face model, which holds one set of weights",
                               "drop --init_ema");
    w.format = index ? "sharded safetensors" : "Hugging Face folder";
    w.tensors = read_hf_weights(index ? std::filesystem::path(path).parent_path().string() : path);
  } else if (is_hf_folder(path)) {
    // Its config.json's model_type says which family reads it.
    const bool llama = hf_model_type(path) == "llama";
    const std::string reader = llama ? "llama" : "gpt";
    if (f.name != reader)
      throw usage_error(fmt::format("--init_from '{}' is a Hugging Face {} folder, which model {} reads (got --model {})",
                                    path, llama ? "Llama" : "GPT-2", reader, f.name),
                        "pass --model " + reader);
    if (ema) throw usage_error("--init_ema: '" + path + "' is a Hugging Face folder, which holds one set of weights",
                               "drop --init_ema");
    if (llama) {
      w.llama = read_hf_llama_config(path);
      w.gpt = w.llama->base;
      w.shape_from = path + "/config.json";
      w.format = "Hugging Face Llama";
      w.tensors = read_hf_llama_weights(path, *w.llama);
      return w;
    }
    w.gpt = read_hf_gpt2_config(path);
    w.shape_from = path + "/config.json";
    w.format = "Hugging Face GPT-2";
    w.tensors = read_hf_gpt2_weights(path, w.gpt, gpt_padded_vocab(w.gpt.vocab));
    return w;
  } else {
    read_weights_file(w, f, ema);
  }
  if (w.tensors.empty()) throw usage_error(path + ": holds no tensors", kWeightsHint);
  for (bool again = true; again;) {
    again = false;
    for (const auto& p : kPrefixes) {
      // A prefix the family's own names start with is theirs (llama's "model."), not a wrapper's.
      const bool own = std::any_of(f.layers.begin(), f.layers.end(),
                                   [&](const auto& l) { return l.rfind(p, 0) == 0 || l + "." == p; });
      const bool all = std::all_of(w.tensors.begin(), w.tensors.end(),
                                   [&](const auto& t) { return t.first.size() > p.size() && t.first.rfind(p, 0) == 0; });
      if (own || !all) continue;
      for (auto& t : w.tensors) t.first.erase(0, p.size());
      w.stripped.push_back(p);
      again = true;
    }
  }
  if (f.name == "gpt") drop_gpt_extras(w);
  // The PyTorch twin's names (when they differ) become gputrain's.
  for (auto& t : w.tensors)
    for (const auto& [ours, twin] : f.twin_names)
      if (t.first == twin || t.first.rfind(twin + ".", 0) == 0) {
        t.first = ours + t.first.substr(twin.size());
        break;
      }
  // A tied parameter may be stored under any of its names (save_pretrained keeps one, state_dict
  // both): it is loaded under the model's own.
  for (const auto& [alias, own] : f.tied) {
    const auto find = [&](const std::string& name) {
      return std::find_if(w.tensors.begin(), w.tensors.end(), [&](const auto& t) { return t.first == name; });
    };
    const auto other = find(alias);
    if (other == w.tensors.end()) continue;
    if (const auto it = find(own); it == w.tensors.end()) {
      other->first = own;
    } else {
      if (!it->second.sizes().equals(other->second.sizes()) || !torch::equal(it->second, other->second))
        throw usage_error(fmt::format("--init_from '{}': '{}' and '{}' are one tied parameter in model {}, and differ in "
                                      "the file", path, printable(alias), printable(own), f.name),
                          "tie them in the module that saved the file, or untie them in the model and export it again");
      w.tensors.erase(other);
    }
  }
  return w;
}

std::pair<std::string, std::string> stem_from_weights(const InitWeights& w, const Family& f) {
  if (!f.stem) return {};
  for (const auto& [name, t] : w.tensors)
    if (name == "conv1.weight" && t.dim() == 4 && t.size(2) == t.size(3)) {
      const int64_t k = t.size(2);
      if (k == 7 || k == 3)
        return {k == 7 ? "imagenet" : "small", fmt::format("--init_from: its conv1.weight is {}x{}", k, k)};
    }
  return {};
}

InitReport load_init_weights(Net& model, const Family& f, const InitWeights& w, bool strict) {
  std::map<std::string, const torch::Tensor*> file;
  for (const auto& [name, t] : w.tensors) file[name] = &t;
  std::vector<std::string> names_in_file;  // as messages show them (names from a file are data)
  for (const auto& [name, t] : w.tensors) names_in_file.push_back(printable(name));

  std::vector<std::pair<std::string, std::string>> skipped;  // name, why
  std::vector<std::string> initial, problems;
  std::set<std::string> used;
  int64_t loaded = 0, values = 0;
  std::vector<std::pair<torch::Tensor, const torch::Tensor*>> copies;
  for (const auto& [name, t] : model_tensors(model)) {
    auto it = file.find(name);
    if (it == file.end()) {
      // The head starts afresh; a BatchNorm's step counter matters only without momentum
      // (PyTorch, too, lets old files lack it).
      if (in_head(f, name) || ends_with(name, "num_batches_tracked"))
        initial.push_back(name);
      else
        problems.push_back(fmt::format("'{}' ({}) is not in the file{}", name, shape_text(t),
                                       did_you_mean(name, names_in_file)));
      continue;
    }
    used.insert(name);
    const torch::Tensor& src = *it->second;
    if (src.sizes() != t.sizes()) {
      const std::string why = fmt::format("shape {} in the file vs {}", shape_text(src), shape_text(t));
      if (in_head(f, name)) {
        skipped.emplace_back(name, why);
        continue;
      }
      if (f.stem && name == "conv1.weight" && src.dim() == 4 && src.size(0) != t.size(0))
        problems.push_back(fmt::format("'{}': {}: the file's width is {}; pass --width {}", name, why, src.size(0),
                                       src.size(0)));
      else if (f.stem && name == "conv1.weight")
        problems.push_back(fmt::format("'{}': {}: the file's stem is {}x{}; pass --stem {} (or --stem auto)", name, why,
                                       src.size(-1), src.size(-1), src.size(-1) == 7 ? "imagenet" : "small"));
      else
        problems.push_back(fmt::format("'{}': {}", name, why));
      continue;
    }
    const bool both_float = src.is_floating_point() && t.is_floating_point();
    const bool both_int = !src.is_floating_point() && !t.is_floating_point() && src.scalar_type() != torch::kBool &&
                          t.scalar_type() != torch::kBool;
    if (!both_float && !both_int) {
      problems.push_back(fmt::format("'{}': dtype {} in the file vs {}", name, c10::toString(src.scalar_type()),
                                     c10::toString(t.scalar_type())));
      continue;
    }
    copies.emplace_back(t, &src);
    ++loaded;
    values += t.numel();
  }
  std::vector<std::string> unused, ours;
  for (const auto& [name, t] : w.tensors)
    if (!used.count(name)) unused.push_back(name);
  for (const auto& [name, t] : model_tensors(model)) ours.push_back(name);
  if (strict)
    for (const auto& name : unused)
      problems.push_back(
          fmt::format("'{}' in the file is not in model {}{}", printable(name), f.name, did_you_mean(name, ours)));
  if (loaded == 0)
    throw usage_error(fmt::format("--init_from '{}': none of its {} tensors fits model {} (first: '{}')", w.path,
                                  w.tensors.size(), f.name, printable(w.tensors.front().first)),
                      "check --model and the model flags (--width, --depth, --stem) against the file");
  if (strict && !problems.empty()) {
    // One error line and its hint; every mismatch goes to the run's log (stdout) above them.
    for (const auto& p : problems) fmt::print("init_from: does not fit: {}\n", p);
    std::fflush(stdout);
    throw usage_error(
        problems.size() == 1 ? fmt::format("--init_from '{}': {}", w.path, problems.front())
                             : fmt::format("--init_from '{}': {} tensors do not fit model {} (first: {}; all of them "
                                           "are listed above)",
                                           w.path, problems.size(), f.name, problems.front()),
        "check --model and the model flags (--width, --depth, --stem) against the file; --no-init_strict loads what "
        "matches and leaves the rest at its initial values");
  }
  {
    torch::NoGradGuard no_grad;
    for (auto& [to, from] : copies) to.copy_(*from);
  }

  InitReport r;
  std::vector<nlohmann::json> skipped_json;
  for (const auto& [name, why] : skipped) skipped_json.push_back({{"name", name}, {"reason", why}});
  r.record = {{"event", "init_from"}, {"step", 0}, {"epoch", 0}, {"path", w.path}, {"format", w.format},
              {"loaded", loaded},     {"loaded_values", values}, {"skipped", skipped_json},
              {"initial", initial},   {"strict", strict}};
  if (!w.wrapper.empty()) r.record["wrapper"] = w.wrapper;
  if (!w.stripped.empty()) r.record["stripped"] = w.stripped;
  if (!strict) r.record["unused"] = unused;
  std::string where = w.format;
  if (!w.wrapper.empty()) where += ", under '" + w.wrapper + "'";
  if (!w.stripped.empty()) where += ", prefix " + join(w.stripped, "") + " removed";
  r.lines.push_back(fmt::format("init_from: {} ({})", w.path, where));
  r.lines.push_back(fmt::format("  loaded   {} tensors, {} values", loaded, values));
  for (const auto& [name, why] : skipped)
    r.lines.push_back(fmt::format("  skipped  {}: {}{}", name, why, in_head(f, name) ? " (the head starts afresh)" : ""));
  r.lines.push_back("  initial  " + (initial.empty() ? std::string("none") : join(initial, ", ")));
  if (!strict) {
    for (size_t i = 0; i < problems.size(); ++i) r.lines.push_back("  not loaded (--no-init_strict): " + problems[i]);
    if (!unused.empty()) r.lines.push_back(fmt::format("  unused   {} tensors of the file", unused.size()));
  }
  return r;
}

}  // namespace gputrain
