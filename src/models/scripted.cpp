// A model family built from a TorchScript module: the Net registers the module's own parameter
// and buffer tensors (the same tensors, so moves and updates reach the module) under their
// names, and its forward calls the module's forward.
#include "models/scripted.h"

#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <torch/script.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "models/registry.h"
#include "weights/torch_save.h"

namespace gputrain {
namespace {

constexpr const char* kScriptHint =
    "--model takes a TorchScript module saved with torch.jit.save(torch.jit.script(model), 'net.pt'), or better a "
    "torch.export program net.pt2 (tools/export_model.py writes one)";

class ScriptedNet : public Net {
 public:
  explicit ScriptedNet(torch::jit::Module module) : module_(std::move(module)) {
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      auto [owner, leaf] = owner_of(*this, p.name);
      owner->register_parameter(leaf, p.value, /*requires_grad=*/true);
    }
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
      auto [owner, leaf] = owner_of(*this, b.name);
      owner->register_buffer(leaf, b.value);
    }
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto y = module_.forward({x});
    if (!y.isTensor()) throw std::invalid_argument("the TorchScript module's forward returns " + y.tagKind() + ", not a tensor");
    return y.toTensor();
  }
  void train(bool on = true) override {
    module_.train(on);
    Net::train(on);
  }

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
  f.make = [path](const ModelSpec&) -> NetPtr { return std::make_shared<ScriptedNet>(load(path)); };
  f.input = "what its forward takes";
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
