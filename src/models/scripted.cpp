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

// The forward's argument names after self: with named fields each reads the field of its name;
// x/y data feeds its one argument x.
std::vector<std::string> argument_names(torch::jit::Module& module) {
  std::vector<std::string> names;
  const auto& args = module.get_method("forward").function().getSchema().arguments();
  for (size_t i = 1; i < args.size(); ++i) names.push_back(args[i].name());
  return names;
}

class ScriptedNet : public Net {
 public:
  ScriptedNet(torch::jit::Module module, const std::string& path, const ModelSpec& spec)
      : module_(std::move(module)), output_(spec.output_name) {
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      auto [owner, leaf] = owner_of(*this, p.name);
      owner->register_parameter(leaf, p.value, /*requires_grad=*/true);
    }
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
      auto [owner, leaf] = owner_of(*this, b.name);
      owner->register_buffer(leaf, b.value);
    }
    inputs_ = argument_names(module_);
    if (!spec.fields) {
      if (inputs_.size() != 1)
        throw usage_error(path + ": forward takes " + join(inputs_, ", ") + "; the data gives one sample tensor, x",
                          "use --dataset jsonl, whose named fields bind to the forward's arguments by name");
      inputs_ = {"x"};
      return;
    }
    for (const auto& name : inputs_)
      if (!spec.fields->find(name))
        throw usage_error(path + ": forward takes '" + name + "', which the data lacks: its fields are " +
                              join(spec.fields->names(), ", "),
                          "arguments bind to fields by name: rename the argument or the data's field");
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
    auto fail = [&](const std::string& what) { return std::invalid_argument("the TorchScript module's forward returns " + what); };
    if (y.isTensor()) {
      if (!output_.empty() && output_ != "0") throw fail("one tensor, which has no output '" + output_ + "'");
      return y.toTensor();
    }
    c10::IValue picked;
    if (y.isTuple()) {
      const auto& items = y.toTupleRef().elements();
      size_t at = 0;
      if (!output_.empty()) {
        at = output_.find_first_not_of("0123456789") == std::string::npos ? std::stoul(output_) : items.size();
        if (at >= items.size()) throw fail(fmt::format("a tuple of {}, which has no output '{}'", items.size(), output_));
      }
      if (!items.empty()) picked = items[at];
    } else if (y.isGenericDict()) {
      const auto dict = y.toGenericDict();
      std::vector<std::string> keys;
      for (const auto& item : dict) {
        const std::string key = item.key().isString() ? item.key().toStringRef() : "";
        keys.push_back(key);
        if (!picked.isTensor() && (output_.empty() || output_ == key)) picked = item.value();
      }
      if (!picked.isTensor()) throw fail("a dict of " + join(keys, ", ") + (output_.empty() ? "" : ", without '" + output_ + "'"));
    }
    if (!picked.isTensor()) throw fail(y.tagKind() + ", not a tensor, a tuple or a dict of tensors");
    return picked.toTensor();
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
  std::set<const c10::TensorImpl*> seen;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    // One tensor under two names (tied weights) would be two parameters to the optimizer.
    if (!seen.insert(p.value.unsafeGetTensorImpl()).second)
      throw usage_error(path + ": parameter '" + p.name + "' is another parameter's tensor (tied weights), which "
                               "gputrain does not train yet",
                        "untie them in the module (give each its own parameter) and save it again");
    parameters.push_back(p.name);
  }
  set_layers_from_names(f, parameters);
  f.twin = "the TorchScript module saved to " + path;
  known = std::move(made);
  return *known;
}

}  // namespace gputrain
