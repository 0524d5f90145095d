// Fine-tuning controls: frozen parameters and per-layer learning rates.
#include "step/fine_tune.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "models/registry.h"

namespace gputrain {
namespace {

// The first component of every parameter name, in order ("conv1", "bn1", "layer1", ...).
std::vector<std::string> top_level_names(const Net& model) {
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) {
    const std::string top = p.key().substr(0, p.key().find('.'));
    if (std::find(names.begin(), names.end(), top) == names.end()) names.push_back(top);
  }
  return names;
}

}  // namespace

std::vector<std::string> frozen_parameters(const Net& model, const Family& f, const std::string& freeze) {
  std::vector<std::string> names;
  if (freeze.empty()) return names;
  const auto prefixes = split_list(freeze, ListItems::kTrimmed);
  std::set<std::string> matched;
  for (const auto& p : model.named_parameters()) {
    const std::string& name = p.key();
    for (const auto& prefix : prefixes)
      if (prefix == "backbone" ? !in_head(f, name) : under_prefix(name, prefix)) {
        names.push_back(name);
        matched.insert(prefix);
        break;
      }
  }
  for (const auto& prefix : prefixes)
    if (!matched.count(prefix))
      throw usage_error(fmt::format("--freeze '{}': '{}' names no parameter of model {}", freeze, prefix, f.name),
                        "give name prefixes of its parameters, such as " + join(top_level_names(model), ", ") +
                            ", or backbone (all but " + join(f.head, ", ") + ")");
  if (names.size() == model.named_parameters().size())
    throw usage_error(fmt::format("--freeze '{}' freezes every parameter of model {}: nothing would train", freeze, f.name),
                      "freeze less, e.g. --freeze backbone keeps the head (" + join(f.head, ", ") + ") training");
  return names;
}

void set_frozen(Net& model, const std::vector<std::string>& names, bool freeze_bn) {
  const std::set<std::string> frozen(names.begin(), names.end());
  for (auto& p : model.named_parameters()) p.value().set_requires_grad(!frozen.count(p.key()));
  std::vector<std::shared_ptr<torch::nn::Module>> keep;
  if (freeze_bn && !frozen.empty())
    for (const auto& m : model.named_modules("", /*include_self=*/false)) {
      if (!m.value()->named_buffers(/*recurse=*/false).contains("running_mean")) continue;
      const auto own = m.value()->named_parameters(/*recurse=*/false);
      const bool all_frozen = std::all_of(own.begin(), own.end(), [&](const auto& p) {
        return frozen.count(m.key() + "." + p.key()) > 0;
      });
      if (all_frozen) keep.push_back(m.value());
    }
  model.keep_in_eval(std::move(keep));
  model.train(model.is_training());  // applies the eval-mode layers now
}

LrScale lr_scale(double layer_decay, double backbone_lr_scale, const Family& f, const Net& model) {
  if (layer_decay <= 0 && backbone_lr_scale == 1) return nullptr;
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) names.push_back(p.key());
  const std::vector<int64_t> ids = layer_ids(f, names);
  const int64_t last = ids.empty() ? 0 : *std::max_element(ids.begin(), ids.end());
  std::map<std::string, double> scales;
  for (size_t i = 0; i < names.size(); ++i) {
    double scale = in_head(f, names[i]) ? 1.0 : backbone_lr_scale;
    // As timm: layer i of L at decay^(L-1-i), the last (with the head) at the full rate.
    if (layer_decay > 0) scale *= std::pow(layer_decay, static_cast<double>(last - ids[i]));
    scales[names[i]] = scale;
  }
  return [scales](const std::string& name) {
    auto it = scales.find(name);
    return it == scales.end() ? 1.0 : it->second;
  };
}

}  // namespace gputrain
