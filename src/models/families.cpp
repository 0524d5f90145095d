// The table of model families, and what is decided from a family's spec alone.
#include "models/family.h"

#include <algorithm>

#include <fmt/format.h>

#include "config/config.h"
#include "config/fields.h"
#include "core/error.h"
#include "core/text.h"
#include "models/imported.h"

namespace gputrain {

// Each family's file defines <name>_family(). One line each, in `gputrain models` order; the
// last line closes the list, so a new family is one added line.
#define GPUTRAIN_FAMILIES(X) \
  X(mlp)                     \
  X(cnn)                     \
  X(resnet18)                \
  X(resnet34)                \
  X(resnet50)                \
  X(lstm)                    \
  X(gru)                     \
  X(transformer)             \
  X(cnn3d)                   \
  X(gpt)                     \
  X(llama)                   \
  /* the end of the list */

#define GPUTRAIN_DECLARE(name) const Family& name##_family();
GPUTRAIN_FAMILIES(GPUTRAIN_DECLARE)
#undef GPUTRAIN_DECLARE

const std::vector<const Family*>& families() {
#define GPUTRAIN_ENTRY(name) &name##_family(),
  static const std::vector<const Family*> all = {GPUTRAIN_FAMILIES(GPUTRAIN_ENTRY)};
#undef GPUTRAIN_ENTRY
  return all;
}

std::vector<std::string> model_names() {
  return model_names_where([](const Family&) { return true; });
}

std::vector<std::string> model_names_where(const std::function<bool(const Family&)>& takes) {
  std::vector<std::string> names;
  for (const Family* f : families())
    if (takes(*f)) names.push_back(f->name);
  return names;
}

const Family& family(const std::string& name) {
  if (is_model_file(name)) return imported_family(name);
  for (const Family* f : families())
    if (f->name == name) return *f;
  throw usage_error("unknown model '" + name + "'" + did_you_mean(name, model_names()),
                    "models: " + join(model_names(), ", ") + " (gputrain models lists them)");
}

std::vector<std::string> model_option_problems(const Config& c) {
  const Family& f = family(c.model);
  auto has = [](const Family& g, const char* option) {
    return std::find(g.options.begin(), g.options.end(), option) != g.options.end();
  };
  auto reads = [&](const char* option) { return has(f, option); };
  // "--depth is for lstm, gru, transformer and cnn3d": the families that read it.
  auto readers = [](const std::function<bool(const Family&)>& takes) {
    return join_words(model_names_where(takes), " and ");
  };
  auto option = [&](const char* name) { return readers([&](const Family& g) { return has(g, name); }); };
  std::vector<std::string> problems;
  const std::string got = " (got --model " + c.model + ")";
  // A file's graph calls batch_norm directly: there is no BatchNorm module to swap for the synced one.
  if (c.sync_bn && is_model_file(c.model))
    problems.push_back("--sync_bn is for the built-in models: a model from a file keeps its graph's batch_norm" + got);
  if (!c.output_name.empty() && !is_model_file(c.model))
    problems.push_back("--output_name is for a --model program file (.pt2 or .pt) returning several outputs" + got);
  if (c.depth > 0 && !reads("depth")) problems.push_back("--depth is for " + option("depth") + got);
  if (c.heads > 0 && !reads("heads")) problems.push_back("--heads is for " + option("heads") + got);
  if (c.dropout > 0 && !reads("dropout")) problems.push_back("--dropout is for " + option("dropout") + got);
  if (c.positions > 0 && !reads("positions")) problems.push_back("--positions is for " + option("positions") + got);
  // Llama's own shape flags: one line for any given to another model.
  const bool llama_flag = c.kv_heads > 0 || c.mlp_width > 0 || c.rope_theta > 0 || !c.rope_scaling.empty() ||
                          c.norm_eps > 0 || c.tie_embeddings;
  if (llama_flag && !reads("kv_heads"))
    problems.push_back("--kv_heads, --mlp_width, --rope_theta, --rope_scaling, --norm_eps and --tie_embeddings are for " +
                       option("kv_heads") + got);
  if (c.stem != "auto" && !f.stem)
    problems.push_back("--stem is for " + readers([](const Family& g) { return g.stem; }) + got);
  if (c.grad_checkpointing && !f.blocks)
    problems.push_back("--grad_checkpointing is for " + readers([](const Family& g) { return g.blocks; }) + got);
  if (c.sample_every > 0 && !f.linear_head)
    problems.push_back("--sample_every is for " + readers([](const Family& g) { return g.linear_head; }) +
                       " (a language model writes the text)" + got);
  return problems;
}

void set_layers_from_names(Family& f, const std::vector<std::string>& parameters) {
  for (const auto& name : parameters) {
    const std::string top = name.substr(0, name.find('.'));
    if (f.layers.empty() || f.layers.back() != top) f.layers.push_back(top);
  }
  if (!f.layers.empty()) f.head = {f.layers.back()};
}

bool under_prefix(const std::string& name, const std::string& prefix) {
  return name == prefix || (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
                            name[prefix.size()] == '.');
}

bool in_head(const Family& f, const std::string& name) {
  return std::any_of(f.head.begin(), f.head.end(), [&](const std::string& h) { return under_prefix(name, h); });
}

std::vector<LayerPrefix> layer_prefixes(const std::string& entry) {
  std::vector<LayerPrefix> out;
  for (size_t start = 0, end; start <= entry.size(); start = end + 1) {
    end = std::min(entry.find('+', start), entry.size());
    std::string prefix = entry.substr(start, end - start);
    const bool per_child = prefix.size() > 2 && prefix.compare(prefix.size() - 2, 2, ".*") == 0;
    if (per_child) prefix.resize(prefix.size() - 2);
    out.push_back({prefix, per_child});
  }
  return out;
}

std::vector<int64_t> layer_ids(const Family& f, const std::vector<std::string>& names) {
  // The layer a name belongs to: its entry, or for "x.*" its child "x.N"; "" for none.
  auto key_of = [&](const std::string& name) -> std::string {
    for (const auto& entry : f.layers)
      for (const auto& [prefix, per_child] : layer_prefixes(entry)) {
        if (!under_prefix(name, prefix)) continue;
        if (!per_child) return entry;
        const std::string rest = name.substr(prefix.size() + 1);
        return prefix + "." + rest.substr(0, rest.find('.'));
      }
    return "";
  };
  std::vector<std::string> keys;
  std::vector<int64_t> ids;
  for (const auto& name : names) {
    const std::string key = key_of(name);
    auto it = std::find(keys.begin(), keys.end(), key);
    if (!key.empty() && it == keys.end()) it = keys.insert(keys.end(), key);
    ids.push_back(key.empty() ? -1 : it - keys.begin());
  }
  const int64_t last = std::max<int64_t>(static_cast<int64_t>(keys.size()) - 1, 0);
  for (auto& id : ids)
    if (id < 0) id = last;
  return ids;
}

std::pair<std::string, std::string> choose_stem(const std::vector<int64_t>& shape) {
  // The ImageNet stem (7x7/2 + max-pool) shrinks a small image 4x before the first block; up to
  // 64 px the 3x3 stem keeps the resolution, as CIFAR recipes do.
  const bool small = shape.size() == 3 && shape[1] <= 64 && shape[2] <= 64;
  return {small ? "small" : "imagenet",
          shape.size() == 3 ? fmt::format("{}x{} images ({} 64 px)", shape[1], shape[2], small ? "up to" : "over")
                            : "not an image"};
}

}  // namespace gputrain
