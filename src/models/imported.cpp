// A model family built from a torch.export archive: the Net registers the program's parameters
// and buffers under their state_dict names (nested modules, so "blocks.0.fc.weight" stays that
// name in checkpoints, exports and --init_from), and its forward runs the training graph, or
// the eval graph in eval mode.
#include "models/imported.h"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/text.h"
#include "models/exported_graph.h"
#include "models/registry.h"
#include "models/scripted.h"
#include "weights/pt2_archive.h"

namespace gputrain {
namespace {

// One file, read and compiled once: the weights it starts from and its two graphs.
struct Program {
  std::string path;
  std::map<std::string, torch::Tensor> weights;  // parameters and persistent buffers, by name
  // Tensor constants and non-persistent buffers, by the signature's names: the training
  // program's, and the eval program's own (its lifted constants may differ).
  std::map<std::string, torch::Tensor> constants, eval_constants;
  std::unique_ptr<ExportedGraph> train, eval;
  std::string eval_note;
  Family family;
};

class ImportedNet : public Net {
 public:
  explicit ImportedNet(const Program& p) : p_(p) {
    train_ = bind(*p.train, p.constants);
    eval_ = bind(*p.eval, p.eval_constants);
  }

  torch::Tensor forward(torch::Tensor x) override {
    const Bound& b = is_training() ? train_ : eval_;
    std::vector<c10::IValue> values;
    values.reserve(b.tensors.size());
    for (size_t i = 0; i < b.tensors.size(); ++i) {
      if (!b.tensors[i].defined()) values.emplace_back(x);
      else if (b.constant[i]) values.emplace_back(constant_on(b.tensors[i], x.device()));
      else values.emplace_back(b.tensors[i]);
    }
    auto out = b.graph->run(std::move(values), x.device());
    // A functional program returns its buffers' new values: they are written back.
    if (!b.mutated.empty()) {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < b.mutated.size(); ++i) b.mutated[i].copy_(out[1 + i]);
    }
    return out[0];
  }

 private:
  // A graph's inputs in order: the user input (undefined here), then the tensors it reads.
  struct Bound {
    const ExportedGraph* graph = nullptr;
    std::vector<torch::Tensor> tensors, mutated;
    std::vector<bool> constant;
  };

  // Parameters and buffers are the module's, shared by both graphs; tensor constants are each
  // graph's own.
  Bound bind(const ExportedGraph& g, const std::map<std::string, torch::Tensor>& constants) {
    Bound b;
    b.graph = &g;
    for (const auto& in : g.inputs()) {
      torch::Tensor t;
      if (in.kind == GraphInput::Kind::Constant) {
        t = take(in, constants);
      } else if (in.kind != GraphInput::Kind::User) {
        auto it = own_.find(in.name);
        // A non-persistent buffer sits among the constants: module state all the same.
        const bool stored = in.kind == GraphInput::Kind::Parameter || p_.weights.count(in.name);
        if (it == own_.end()) it = own_.emplace(in.name, take(in, stored ? p_.weights : p_.constants)).first;
        t = it->second;
      }
      b.tensors.push_back(t);
      b.constant.push_back(t.defined() && !registered_.count(t.unsafeGetTensorImpl()));
    }
    for (const auto& name : g.mutated_buffers()) {
      const auto it = own_.find(name);
      if (it == own_.end())
        throw usage_error(p_.path + ": the graph writes buffer '" + name + "', which it does not read", kPt2Hint);
      b.mutated.push_back(it->second);
    }
    return b;
  }

  // A parameter or (persistent) buffer is registered: it moves with the model, trains and is
  // saved. A tensor constant or a non-persistent buffer is not (PyTorch's state_dict holds
  // neither): it follows the input's device at run time.
  torch::Tensor take(const GraphInput& in, const std::map<std::string, torch::Tensor>& from) {
    const auto it = from.find(in.name);
    if (it == from.end())
      throw usage_error(p_.path + ": the graph reads '" + in.name + "', which the archive does not hold", kPt2Hint);
    if (it->second.sizes().vec() != in.shape)
      throw usage_error(fmt::format("{}: '{}' holds a tensor of shape [{}], the graph reads one of shape [{}]", p_.path,
                                    in.name, fmt::join(it->second.sizes(), ", "), fmt::join(in.shape, ", ")),
                        kPt2Hint);
    auto t = it->second.clone();  // each model its own copy of the file's start
    if (&from != &p_.weights) return t;
    auto [owner, leaf] = owner_of(*this, in.name);
    if (in.kind == GraphInput::Kind::Parameter) t = owner->register_parameter(leaf, t, /*requires_grad=*/true);
    else t = owner->register_buffer(leaf, t);
    registered_.insert(t.unsafeGetTensorImpl());
    return t;
  }

  torch::Tensor constant_on(const torch::Tensor& t, c10::Device device) {
    if (t.device() == device) return t;
    auto& moved = on_device_[t.unsafeGetTensorImpl()];
    if (!moved.defined() || moved.device() != device) moved = t.to(device);
    return moved;
  }

  const Program& p_;
  std::map<std::string, torch::Tensor> own_;  // the module's tensors the graphs read, by name
  std::set<const c10::TensorImpl*> registered_;
  Bound train_, eval_;
  std::map<const c10::TensorImpl*, torch::Tensor> on_device_;
};

// Names a module can hold: no empty part ("fc1..weight"), none the prefix of another ("fc" and
// "fc.bias"), and parameters that can require gradients.
void check_names(const std::string& path, const std::map<std::string, torch::Tensor>& weights,
                 const ExportedGraph& g) {
  std::string previous;
  for (const auto& [name, t] : weights) {
    if (name.empty() || name.front() == '.' || name.back() == '.' || name.find("..") != std::string::npos)
      throw usage_error(path + ": '" + name + "' is not a module's tensor name", kPt2Hint);
    if (!previous.empty() && name.compare(0, previous.size() + 1, previous + ".") == 0)
      throw usage_error(path + ": '" + previous + "' is a tensor and a module ('" + name + "')", kPt2Hint);
    previous = name;
  }
  for (const auto& in : g.inputs())
    if (in.kind == GraphInput::Kind::Parameter) {
      const auto it = weights.find(in.name);
      if (it != weights.end() && !it->second.is_floating_point())
        throw usage_error(path + ": parameter '" + in.name + "' is " + c10::toString(it->second.scalar_type()) +
                              ", not floating point: it cannot train",
                          kPt2Hint);
    }
}

std::string shape_words(const std::vector<int64_t>& dims) {
  std::vector<std::string> words;
  for (auto d : dims) words.push_back(d < 0 ? "any" : std::to_string(d));
  return join(words, " x ");
}

std::unique_ptr<Program> load(const std::string& path) {
  auto p = std::make_unique<Program>();
  p->path = path;
  Pt2Archive archive = read_pt2(path);
  p->weights.insert(archive.weights.begin(), archive.weights.end());
  p->constants.insert(archive.constants.begin(), archive.constants.end());
  p->train = std::make_unique<ExportedGraph>(archive.program, path, /*eval=*/false);
  check_names(path, p->weights, *p->train);
  const auto& shape = p->train->input_shape();
  if (shape.empty() || shape[0] >= 0)
    throw usage_error(path + ": exported with a fixed batch size" + (shape.empty() ? "" : " of " + std::to_string(shape[0])) +
                          "; gputrain's loader gives batches of any size",
                      "export with a dynamic batch: dynamic_shapes=({0: torch.export.Dim(\"batch\")},) "
                      "(tools/export_model.py does)");
  // <stem>.eval.pt2 beside <stem>.pt2: the program of model.eval().
  const std::string eval_path = path.substr(0, path.size() - 4) + ".eval.pt2";
  if (std::filesystem::exists(eval_path)) {
    Pt2Archive eval = read_pt2(eval_path);
    p->eval = std::make_unique<ExportedGraph>(eval.program, eval_path, /*eval=*/false);
    p->eval_constants.insert(eval.constants.begin(), eval.constants.end());
    auto names = [](const ExportedGraph& g) {
      std::vector<std::string> v;
      for (const auto& in : g.inputs())
        if (in.kind == GraphInput::Kind::Parameter || in.kind == GraphInput::Kind::Buffer) v.push_back(in.name);
      std::sort(v.begin(), v.end());
      return v;
    };
    if (names(*p->eval) != names(*p->train))
      throw usage_error(eval_path + ": its parameters and buffers are not those of " + path,
                        "export both from the same module (tools/export_model.py writes the pair)");
    if (p->eval->input_shape() != p->train->input_shape() || p->eval->output_shape() != p->train->output_shape())
      throw usage_error(eval_path + ": its input or output shape differs from " + path + "'s",
                        "export both from the same module with the same dynamic batch (tools/export_model.py writes the pair)");
    p->eval_note = "evaluates with " + eval_path;
  } else {
    p->eval = std::make_unique<ExportedGraph>(archive.program, path, /*eval=*/true);
    p->eval_constants = p->constants;
    p->eval_note = "evaluates the training graph in eval mode (batch_norm on running statistics, dropout off); a "
                   "forward that branches on self.training needs " + eval_path;
  }
  Family& f = p->family;
  f.name = path;
  const Program* program = p.get();
  f.make = [program](const ModelSpec& spec) -> NetPtr {
    const auto& want = program->train->input_shape();
    bool fits = want.size() == spec.input_shape.size() + 1;
    for (size_t i = 1; fits && i < want.size(); ++i) fits = want[i] < 0 || want[i] == spec.input_shape[i - 1];
    if (!fits)
      throw usage_error(fmt::format("{} takes samples of shape {}, the data gives {}", program->family.name,
                                    shape_words({want.begin() + 1, want.end()}), shape_text(spec.input_shape)),
                        "export the model with an example input of the data's sample shape");
    const auto& out = program->train->output_shape();
    if (out.size() != 2 || (out[1] >= 0 && out[1] != spec.num_classes))
      throw usage_error(fmt::format("{} returns outputs of shape {} per batch; the data needs {} per sample",
                                    program->family.name, shape_words(out), spec.num_classes),
                        "export a model whose last layer has as many outputs as the data has classes (or targets)");
    return std::make_shared<ImportedNet>(*program);
  };
  f.ranks = {shape.size() - 1};
  f.input = shape_words({shape.begin() + 1, shape.end()});
  f.width = false;
  std::vector<std::string> parameters;
  for (const auto& in : p->train->inputs())
    if (in.kind == GraphInput::Kind::Parameter) parameters.push_back(in.name);
  set_layers_from_names(f, parameters);
  f.twin = "the Python module exported to " + path;
  return p;
}

std::map<std::string, std::unique_ptr<Program>>& programs() {
  static std::map<std::string, std::unique_ptr<Program>> all;
  return all;
}

const Program& program(const std::string& path) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto& p = programs()[path];
  if (!p) p = load(path);
  return *p;
}

bool is_script(const std::string& path) { return path.size() > 3 && path.compare(path.size() - 3, 3, ".pt") == 0; }

}  // namespace

const Family& imported_family(const std::string& path) {
  return is_script(path) ? scripted_family(path) : program(path).family;
}

std::string imported_eval_note(const std::string& path) {
  if (is_script(path))
    return "a TorchScript module: train() and eval() as the module defines them (TorchScript is deprecated upstream; "
           "a .pt2 program is the path that lasts)";
  return program(path).eval_note;
}

}  // namespace gputrain
