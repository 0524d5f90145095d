// Checkpoints as gputrain wrote them before format 3 (formats 1 and 2: archives LibTorch writes
// as TorchScript), for the tests that read them: the last release's save_checkpoint, and a
// conversion of a format-3 file into that layout for end-to-end resumes.
#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include "train/checkpoint.h"
#include "step/optimizer.h"

namespace gputrain::test {

// The last release's save_checkpoint (format 2), or format 1 (the position in micro-batches of
// `batches`, no evaluated flag).
inline void write_legacy_checkpoint(const std::string& path, Trainer& trainer, const CheckpointMeta& meta,
                                    int version = 2, int64_t batches = 0) {
  torch::serialize::OutputArchive archive, model, optimizer, ema;
  trainer.model().save(model);
  trainer.optimizer().sync_steps();
  trainer.optimizer().base().save(optimizer);
  archive.write("model", model);
  archive.write("optimizer", optimizer);
  const auto [scale, growth] = trainer.scaler().state();
  archive.write("scaler.scale", scale);
  archive.write("scaler.growth_tracker", growth);
  if (const Ema* e = trainer.ema()) {
    const auto all = e->tensors();
    for (size_t i = 0; i < all.size(); ++i) ema.write(e->names()[i], all[i], /*is_buffer=*/i >= trainer.model().parameters().size());
    archive.write("ema", ema);
  }
  archive.write("meta.format", c10::IValue("gputrain-checkpoint-" + std::to_string(version)));
  archive.write("meta.epoch", c10::IValue(meta.epoch));
  if (version == 1) {
    archive.write("meta.batch", c10::IValue(batches));
  } else {
    archive.write("meta.samples", c10::IValue(meta.samples));
    archive.write("meta.evaluated", c10::IValue(meta.evaluated));
  }
  archive.write("meta.step", c10::IValue(meta.step));
  archive.write("meta.best_accuracy", c10::IValue(meta.best_score));
  archive.write("meta.config", c10::IValue(meta.config_json));
  archive.write("meta.evals_since_best", c10::IValue(meta.evals_since_best));
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("rng.cpu", gen.get_state());
  }
  if (meta.rank_rng.cpu.defined()) archive.write("rng.ranks.cpu", meta.rank_rng.cpu);
  archive.save_to(path);
}

// A format-3 checkpoint rewritten as format 2 in the layout LibTorch's Module::save and
// Optimizer::save give it (nested archives per submodule; optimizer state keyed by addresses),
// for AdamW runs: what a run in flight under the last release has on disk.
inline void convert_to_format_2(const std::string& from, const std::string& to) {
  const CheckpointData c = read_checkpoint_file(from);
  // Module::save nests one archive per submodule: "layer1.0.conv1.weight" is four levels down.
  struct Node {
    std::map<std::string, Node> children;
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
  };
  auto tree_of = [](const NamedTensors& named) {
    Node root;
    for (const auto& [name, t] : named) {
      Node* n = &root;
      std::string rest = name;
      for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1))
        n = &n->children[rest.substr(0, dot)];
      n->tensors.emplace_back(rest, t);
    }
    return root;
  };
  std::function<void(const Node&, torch::serialize::OutputArchive&)> write = [&](const Node& n, auto& out) {
    for (const auto& [name, t] : n.tensors) out.write(name, t);  // (parameter or buffer: the same record)
    for (const auto& [name, child] : n.children) {
      torch::serialize::OutputArchive a;
      write(child, a);
      out.write(name, a);
    }
  };
  torch::serialize::OutputArchive archive, model, optimizer, state, groups;
  write(tree_of(c.model), model);
  archive.write("model", model);
  const auto address = [](int64_t i) { return std::to_string(94000000000000 + 16 * i); };
  for (const auto& [index, tensors] : c.optimizer.state) {
    torch::serialize::OutputArchive s;
    for (const auto& [name, t] : tensors) {
      if (name == "step")
        s.write("step", c10::IValue(static_cast<int64_t>(t.item<double>())));
      else
        s.write(name, t);
    }
    state.write(address(index), s);
  }
  groups.write("param_groups/size", torch::tensor(static_cast<int64_t>(c.optimizer.groups.size())));
  for (size_t g = 0; g < c.optimizer.groups.size(); ++g) {
    const auto& group = c.optimizer.groups[g];
    torch::serialize::OutputArchive ga, options;
    ga.write("params/size", torch::tensor(static_cast<int64_t>(group.params.size())));
    for (size_t j = 0; j < group.params.size(); ++j) ga.write("params/" + std::to_string(j), c10::IValue(address(group.params[j])));
    torch::optim::AdamWOptions o(group.numbers.at("lr"));
    o.eps(group.numbers.at("eps")).weight_decay(group.numbers.at("weight_decay")).amsgrad(group.flags.at("amsgrad"));
    o.betas({group.betas->first, group.betas->second});
    o.serialize(options);
    ga.write("options", options);
    groups.write("param_groups/" + std::to_string(g), ga);
  }
  optimizer.write("pytorch_version", c10::IValue("1.5.0"));
  optimizer.write("state", state);
  optimizer.write("param_groups", groups);
  archive.write("optimizer", optimizer);
  archive.write("scaler.scale", c.scale);
  archive.write("scaler.growth_tracker", c.growth_tracker);
  if (!c.ema.empty()) {
    torch::serialize::OutputArchive ema;
    for (const auto& [name, t] : c.ema) ema.write(name, t);
    archive.write("ema", ema);
  }
  archive.write("meta.format", c10::IValue("gputrain-checkpoint-2"));
  archive.write("meta.epoch", c10::IValue(c.meta.epoch));
  archive.write("meta.samples", c10::IValue(c.meta.samples));
  archive.write("meta.evaluated", c10::IValue(c.meta.evaluated));
  archive.write("meta.step", c10::IValue(c.meta.step));
  archive.write("meta.best_accuracy", c10::IValue(c.meta.best_score));
  archive.write("meta.config", c10::IValue(c.meta.config_json));
  archive.write("meta.evals_since_best", c10::IValue(c.meta.evals_since_best));
  if (c.rng_cpu.defined()) archive.write("rng.cpu", c.rng_cpu);
  archive.save_to(to);
}

}  // namespace gputrain::test
