// Fine-tuning controls: frozen parameters and per-layer learning rates.
#include "train/fine_tune.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "models/registry.h"

namespace gputrain {
namespace {

bool under(const std::string& name, const std::string& prefix) {
  return name == prefix || name.rfind(prefix + ".", 0) == 0;
}

bool under_any(const std::string& name, const std::vector<std::string>& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](const auto& p) { return under(name, p); });
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
      if (prefix == "backbone" ? !under_any(name, f.head) : under(name, prefix)) {
        names.push_back(name);
        matched.insert(prefix);
        break;
      }
  }
  for (const auto& prefix : prefixes)
    if (!matched.count(prefix))
      throw usage_error(fmt::format("--freeze '{}': '{}' names no parameter of model {}", freeze, prefix, f.name),
                        "give name prefixes such as " + join(f.layers, ", ") + ", or backbone (all but " +
                            join(f.head, ", ") + ")");
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

LrScale lr_scale(const Config& c, const Family& f) {
  if (c.layer_decay <= 0 && c.backbone_lr_scale == 1) return nullptr;
  const double decay = c.layer_decay, backbone = c.backbone_lr_scale;
  const std::vector<std::string> layers = f.layers, head = f.head;
  return [=](const std::string& name) {
    double scale = under_any(name, head) ? 1.0 : backbone;
    if (decay > 0) {
      // As timm assigns layer ids: the first layer 0, the last (the head) L-1 at the full rate.
      const auto last = static_cast<int64_t>(layers.size()) - 1;
      int64_t id = 0;
      for (int64_t i = 0; i <= last; ++i)
        if (under(name, layers[static_cast<size_t>(i)])) id = i;
      scale *= std::pow(decay, static_cast<double>(last - id));
    }
    return scale;
  };
}

}  // namespace gputrain
