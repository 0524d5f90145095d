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
#include "data/schema.h"
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

// How a model's inputs and output meet the data: the batch field each user input reads (in the
// graph's order of user inputs), and the output trained.
struct Binding {
  std::vector<std::string> fields;
  std::vector<c10::ScalarType> dtypes;  // each input's own: a field is cast when it differs (int64 -> bool)
  size_t output = 0;
};

class ImportedNet : public Net {
 public:
  ImportedNet(const Program& p, Binding binding) : p_(p), binding_(std::move(binding)) {
    train_ = bind(*p.train, p.constants);
    eval_ = bind(*p.eval, p.eval_constants);
  }

  torch::Tensor forward(torch::Tensor x) override {
    if (binding_.fields.size() != 1)
      throw std::logic_error("ImportedNet::forward: a program of several inputs takes the batch");
    return run({x});
  }

  torch::Tensor forward_batch(const Batch& batch) override {
    std::vector<torch::Tensor> inputs;
    for (size_t i = 0; i < binding_.fields.size(); ++i) {
      const auto& t = batch.at(binding_.fields[i]);
      inputs.push_back(t.scalar_type() == binding_.dtypes[i] || t.is_floating_point() ? t : t.to(binding_.dtypes[i]));
    }
    return run(inputs);
  }

 private:
  // A graph's inputs in order: the user inputs (undefined here), then the tensors it reads.
  struct Bound {
    const ExportedGraph* graph = nullptr;
    std::vector<torch::Tensor> tensors, mutated;
    std::vector<bool> constant;
  };

  // Runs the graph of the current mode on the user inputs, in the graph's order.
  torch::Tensor run(const std::vector<torch::Tensor>& inputs) {
    const Bound& b = is_training() ? train_ : eval_;
    const c10::Device device = inputs.front().device();
    std::vector<c10::IValue> values;
    values.reserve(b.tensors.size());
    size_t next = 0;
    for (size_t i = 0; i < b.tensors.size(); ++i) {
      if (!b.tensors[i].defined()) values.emplace_back(inputs.at(next++));
      else if (b.constant[i]) values.emplace_back(constant_on(b.tensors[i], device));
      else values.emplace_back(b.tensors[i]);
    }
    auto out = b.graph->run(std::move(values), device);
    // A functional program returns its buffers' new values, after its outputs: written back.
    const size_t outputs = b.graph->output_names().size();
    if (!b.mutated.empty()) {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < b.mutated.size(); ++i) b.mutated[i].copy_(out[outputs + i]);
    }
    return out[binding_.output];
  }

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
        GraphInput named = in;
        for (const auto& [alias, own] : p_.family.tied)
          if (alias == in.name) named.name = own;  // one tensor under each of a tied weight's names
        auto it = own_.find(named.name);
        // A non-persistent buffer sits among the constants: module state all the same.
        const bool stored = in.kind == GraphInput::Kind::Parameter || p_.weights.count(named.name);
        if (it == own_.end()) it = own_.emplace(named.name, take(named, stored ? p_.weights : p_.constants)).first;
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
  Binding binding_;
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

// "input_ids: int64 any x any".
std::string input_text(const GraphInput& in) {
  return in.name + ": " + c10::toString(in.dtype) + " " + shape_words(in.shape);
}

// The output trained: --output_name (a dict key or a position), else the first.
size_t chosen_output(const Program& p, const std::string& name) {
  const auto& names = p.train->output_names();
  const int64_t at = pick_output(names, name);
  if (at >= 0) return static_cast<size_t>(at);
  throw usage_error(fmt::format("--output_name '{}': {} returns {}", name, p.path,
                                names.size() == 1 ? "one output" : "outputs " + join(names, ", ")),
                    names.size() == 1 ? "drop --output_name" : "name one of its outputs (a dict key or a position from 0)");
}

// Each user input's field. x/y data: a program of one float input reads x, whatever its name.
// Named fields: each input reads the field of its name, of the same kind (integer or floating
// point), with its fixed sizes, and no longer than a dynamic size's exported maximum.
Binding bind_inputs(const Program& p, const ModelSpec& spec) {
  Binding b;
  b.output = chosen_output(p, spec.output_name);
  const auto inputs = p.train->user_inputs();
  for (const GraphInput* in : inputs) b.dtypes.push_back(in->dtype);
  if (!spec.fields) {
    std::vector<std::string> words;
    for (const GraphInput* in : inputs) words.push_back(input_text(*in));
    if (inputs.size() != 1)
      throw usage_error(fmt::format("{} takes inputs {}; the data gives one sample tensor, x, and its target", p.path,
                                    join(words, ", ")),
                        "use --dataset jsonl, whose named fields bind to the forward's arguments by name");
    const GraphInput& in = *inputs.front();
    if (!c10::isFloatingType(in.dtype))
      throw usage_error(fmt::format("{}: the model's input '{}' is {}; the data gives one float32 tensor (x)", p.path,
                                    in.name, c10::toString(in.dtype)),
                        "integer ids come from --dataset jsonl, whose fields keep int64; or take floats and cast them "
                        "in forward, e.g. self.emb(x.long())");
    bool fits = in.shape.size() == spec.input_shape.size() + 1;
    for (size_t i = 1; fits && i < in.shape.size(); ++i) fits = in.shape[i] < 0 || in.shape[i] == spec.input_shape[i - 1];
    if (!fits)
      throw usage_error(fmt::format("{} takes samples of shape {}, the data gives {}", p.path,
                                    shape_words({in.shape.begin() + 1, in.shape.end()}), shape_text(spec.input_shape)),
                        "export the model with an example input of the data's sample shape");
    b.fields = {"x"};
  } else {
    const SampleSchema& data = *spec.fields;
    for (const GraphInput* in : inputs) {
      const TensorField* f = data.find(in->name);
      if (!f)
        throw usage_error(fmt::format("{} takes input '{}', which the data lacks: its fields are {}", p.path, in->name,
                                      join(data.names(), ", ")),
                          "inputs bind to fields by name: rename the forward's argument or the data's field");
      const bool integer = !c10::isFloatingType(in->dtype);
      if (integer != (f->dtype == DType::kI64))
        throw usage_error(fmt::format("{}: input '{}' is {}, the data's field is {}", p.path, in->name,
                                      c10::toString(in->dtype), f->text()),
                          "export the input with the field's dtype (int64 ids, float32 values)");
      bool fits = in->shape.size() == f->shape.size() + 1;
      for (size_t i = 0; fits && i < f->shape.size(); ++i) {
        const int64_t want = in->shape[i + 1], top = in->largest[i + 1];
        if (f->shape[i] < 0) fits = want < 0 && (top < 0 || f->longest <= top);
        else fits = want < 0 || want == f->shape[i];
      }
      if (!fits)
        throw usage_error(fmt::format("{}: input '{}' takes {}{}, the data's field is {}{}", p.path, in->name,
                                      shape_words({in->shape.begin() + 1, in->shape.end()}),
                                      [&] {
                                        std::string limits;
                                        for (size_t i = 1; i < in->largest.size(); ++i)
                                          if (in->shape[i] < 0 && in->largest[i] >= 0)
                                            limits += fmt::format(" (dimension {} at most {})", i, in->largest[i]);
                                        return limits;
                                      }(),
                                      f->text(), f->varies() ? fmt::format(", up to {} long", f->longest) : ""),
                          "export with the field's sizes; a size that varies needs a torch.export.Dim as large as "
                          "the longest sample");
      // Ids beyond the embedding's rows would index past it: a tokenizer whose vocabulary is the
      // model's no more.
      if (const int64_t rows = p.train->embedding_rows(in->name); rows >= 0 && f->smallest < 0)
        throw usage_error(fmt::format("{}: input '{}' holds token id {}: ids are 0 or more", p.path, in->name, f->smallest),
                          "tokenize with the model's own tokenizer; -100 marks ignored positions in labels, not in ids");
      if (const int64_t rows = p.train->embedding_rows(in->name); rows >= 0 && f->largest >= rows)
        throw usage_error(fmt::format("{}: input '{}' holds token id {}, and the model's embedding has {} rows", p.path,
                                      in->name, f->largest, rows),
                          "tokenize with the model's own tokenizer (tools/prepare_text.py --tokenizer MODEL_DIR), or "
                          "export a model whose vocabulary holds the tokenizer's");
      b.fields.push_back(in->name);
    }
  }
  return b;
}

std::unique_ptr<Program> load(const std::string& path) {
  auto p = std::make_unique<Program>();
  p->path = path;
  Pt2Archive archive = read_pt2(path);
  p->weights.insert(archive.weights.begin(), archive.weights.end());
  p->constants.insert(archive.constants.begin(), archive.constants.end());
  p->train = std::make_unique<ExportedGraph>(archive.program, path, /*eval=*/false);
  // The graph reads a tied tensor under each of its names; the module registers it once, under
  // the name the graph reads first (the module's order: an embedding before the head tied to
  // it), not the archive's first, which is the alphabet's. A tensor may have several other names
  // (an encoder-decoder's shared embedding, both sides' and the head's).
  std::map<std::string, size_t> order;
  for (const auto& in : p->train->inputs()) order.emplace(in.name, order.size());
  const auto rank = [&](const std::string& name) {
    const auto it = order.find(name);
    return it == order.end() ? order.size() : it->second;
  };
  std::map<std::string, std::vector<std::string>> names;  // the archive's stored name -> all its names
  for (const auto& [alias, stored] : archive.tied) {
    auto& group = names[stored];
    if (group.empty()) group.push_back(stored);
    group.push_back(alias);
  }
  archive.tied.clear();
  for (auto& [stored, group] : names) {
    const std::string kept = *std::min_element(group.begin(), group.end(), [&](const auto& x, const auto& y) {
      return rank(x) < rank(y);
    });
    if (kept != stored) {
      p->weights[kept] = p->weights.at(stored);
      p->weights.erase(stored);
    }
    for (const auto& name : group)
      if (name != kept) archive.tied.emplace_back(name, kept);
  }
  p->family.tied = archive.tied;
  const auto causal = archive.gputrain.find("causal_lm");
  if (causal != archive.gputrain.end() && !causal->is_boolean())
    throw usage_error(path + ": extra/gputrain.json: causal_lm is not true or false", kPt2Hint);
  p->family.shift_labels = causal != archive.gputrain.end() && causal->get<bool>();
  check_names(path, p->weights, *p->train);
  for (const GraphInput* in : p->train->user_inputs())
    if (in->shape.empty() || in->shape[0] >= 0)
      throw usage_error(path + ": input '" + in->name + "' is exported with a fixed batch size" +
                            (in->shape.empty() ? "" : " of " + std::to_string(in->shape[0])) +
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
    auto user = [](const ExportedGraph& g) {
      std::vector<std::pair<std::string, std::vector<int64_t>>> v;
      for (const GraphInput* in : g.user_inputs()) v.emplace_back(in->name, in->shape);
      return v;
    };
    if (user(*p->eval) != user(*p->train) || p->eval->output_shapes() != p->train->output_shapes() ||
        p->eval->output_names() != p->train->output_names())
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
  f.make = [program](const ModelSpec& spec) -> NetPtr { return std::make_shared<ImportedNet>(*program, bind_inputs(*program, spec)); };
  const auto inputs = p->train->user_inputs();
  if (inputs.size() == 1) {
    const auto& shape = inputs.front()->shape;
    f.ranks = {shape.size() - 1};
    f.input = shape_words({shape.begin() + 1, shape.end()});
  } else {
    std::vector<std::string> words;
    for (const GraphInput* in : inputs) words.push_back(input_text(*in));
    f.input = join(words, ", ");
  }
  f.named_inputs = true;
  f.width = false;
  std::vector<std::string> parameters;
  for (const auto& in : p->train->inputs())
    if (in.kind == GraphInput::Kind::Parameter) parameters.push_back(in.name);  // a tied head's name too: its layer
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
