// A model family built from a TorchScript module: the Net registers the module's own parameter
// and buffer tensors (the same tensors, so moves and updates reach the module) under their
// names, and its forward calls the module's forward.
#include "models/scripted.h"

#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/text.h"
#include "data/schema.h"
#include "models/registry.h"
#include "weights/torch_save.h"

namespace gputrain {
namespace {

constexpr const char* kScriptHint =
    "--model takes a TorchScript module saved with torch.jit.save(torch.jit.script(model), 'net.pt'), or better a "
    "torch.export program net.pt2 (tools/export_model.py writes one)";

// The forward's arguments after self, by name, and whether each has a default (optional).
std::vector<std::pair<std::string, bool>> forward_arguments(torch::jit::Module& module) {
  std::vector<std::pair<std::string, bool>> out;
  const auto& args = module.get_method("forward").function().getSchema().arguments();
  for (size_t i = 1; i < args.size(); ++i) out.emplace_back(args[i].name(), args[i].default_value().has_value());
  return out;
}

class ScriptedNet : public Net {
 public:
  ScriptedNet(torch::jit::Module module, const std::string& path, const ModelSpec& spec)
      : output_(spec.output_name), module_(std::move(module)) {
    // A tied parameter (one tensor under two names) is registered once, under its first name.
    std::set<const c10::TensorImpl*> seen;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      if (!seen.insert(p.value.unsafeGetTensorImpl()).second) continue;
      auto [owner, leaf] = owner_of(*this, p.name);
      owner->register_parameter(leaf, p.value, /*requires_grad=*/true);
    }
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
      auto [owner, leaf] = owner_of(*this, b.name);
      owner->register_buffer(leaf, b.value);
    }
    // Each required argument reads the field of its name; optional ones (with a default) do
    // while the data has them, in order, and keep their defaults from the first it lacks. x/y
    // data feeds one required argument, x.
    const auto args = forward_arguments(module_);
    std::vector<std::string> required;
    for (const auto& [name, optional] : args)
      if (!optional) required.push_back(name);
    if (!spec.fields) {
      if (required.size() != 1 || args.front().second)
        throw usage_error(path + ": forward takes " + (required.empty() ? "no required argument" : join(required, ", ")) +
                              "; the data gives one sample tensor, x",
                          "use --dataset jsonl, whose named fields bind to the forward's arguments by name");
      inputs_ = {"x"};
      return;
    }
    for (const auto& [name, optional] : args) {
      if (!spec.fields->find(name)) {
        if (optional) break;
        throw usage_error(path + ": forward takes '" + name + "', which the data lacks: its fields are " +
                              join(spec.fields->names(), ", "),
                          "arguments bind to fields by name: rename the argument or the data's field");
      }
      inputs_.push_back(name);
    }
  }
  torch::Tensor forward(torch::Tensor x) override { return output(module_.forward({x})); }
  torch::Tensor forward_batch(const Batch& b) override {
    std::vector<c10::IValue> args;
    for (const auto& name : inputs_) args.emplace_back(b.at(name));
    return output(module_.forward(args));
  }
  void train(bool on = true) override {
    module_.train(on);
    Net::train(on);
  }

 private:
  // A tensor; a tuple's element or a dict's value (--output_name: a key or a position, else the first).
  torch::Tensor output(const c10::IValue& y) const {
    std::vector<std::string> names;
    std::vector<c10::IValue> values;
    if (y.isTensor()) {
      names = {"0"};
      values = {y};
    } else if (y.isTuple()) {
      for (const auto& item : y.toTupleRef().elements()) {
        names.push_back(std::to_string(names.size()));
        values.push_back(item);
      }
    } else if (y.isGenericDict()) {
      for (const auto& item : y.toGenericDict()) {
        names.push_back(item.key().isString() ? item.key().toStringRef() : std::to_string(names.size()));
        values.push_back(item.value());
      }
    }
    const int64_t at = names.empty() ? -1 : pick_output(names, output_);
    if (at < 0 || !values[static_cast<size_t>(at)].isTensor())
      throw std::invalid_argument(
          names.empty() ? "the TorchScript module's forward returns " + y.tagKind() + ", not a tensor, a tuple or a dict"
                        : fmt::format("--output_name '{}': the TorchScript module's forward returns {}{}", output_,
                                      join(names, ", "), at < 0 ? "" : " (that one is not a tensor)"));
    return values[static_cast<size_t>(at)].toTensor();
  }

  std::string output_;
  std::vector<std::string> inputs_;  // the batch field of each forward argument
 private:
  torch::jit::Module module_;
};

torch::jit::Module load(const std::string& path) {
  const MappedFile m = map_file(path);
  switch (detect_weights_format(path, m)) {
    case WeightsFormat::TorchScript: break;
    case WeightsFormat::GputrainCheckpoint:
      throw usage_error(path + ": a gputrain checkpoint, not a model", "continue its run with --resume, or start from its "
                                                                        "weights with --model <family> --init_from " + path);
    default: throw usage_error(path + ": not a TorchScript module (torch.jit.save)", kScriptHint);
  }
  try {
    return torch::jit::load(path, torch::kCPU);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw usage_error(path + ": torch::jit::load failed: " + what.substr(0, what.find('\n')), kScriptHint);
  } catch (const std::exception& e) {  // the TorchScript frontend throws its own kinds too
    const std::string what = e.what();
    throw usage_error(path + ": torch::jit::load failed: " + what.substr(0, what.find('\n')), kScriptHint);
  }
}

}  // namespace

const Family& scripted_family(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Family>> all;
  std::lock_guard<std::mutex> lock(mutex);
  auto& known = all[path];
  if (known) return *known;
  auto module = load(path);  // once here, for the names; each model loads its own copy
  auto made = std::make_unique<Family>();
  Family& f = *made;
  f.name = path;
  f.make = [path](const ModelSpec& spec) -> NetPtr { return std::make_shared<ScriptedNet>(load(path), path, spec); };
  f.input = "what its forward takes";
  f.named_inputs = true;
  f.width = false;
  std::vector<std::string> parameters;
  std::map<const c10::TensorImpl*, std::string> first;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    if (auto [it, added] = first.emplace(p.value.unsafeGetTensorImpl(), p.name); !added) {
      f.tied.emplace_back(p.name, it->second);
      continue;
    }
    parameters.push_back(p.name);
  }
  set_layers_from_names(f, parameters);
  f.twin = "the TorchScript module saved to " + path;
  known = std::move(made);
  return *known;
}

}  // namespace gputrain
