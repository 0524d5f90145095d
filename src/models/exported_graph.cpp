// Compiling and running an exported graph. Values live in numbered slots; each node's arguments
// are constants (converted to IValues once) or slots, in its operator's schema order, and a slot
// is released after its last reader so that activations autograd does not keep are freed.
#include "models/exported_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <fmt/format.h>
#include <torch/types.h>

#include "core/error.h"
#include "models/fast_dropout.h"
#include "models/op_allowlist.h"
#include "weights/export_schema.h"
#include "weights/pt2_archive.h"

namespace gputrain {

using nlohmann::json;

namespace {

// How an argument gets its value at run time.
struct Arg {
  enum class Kind { Const, Slot, Wrapped, Tensors, OptionalTensors, Ints, Device } kind = Kind::Const;
  c10::IValue constant;
  int slot = -1;               // Slot; Wrapped: a size (an int or float) passed where a Tensor goes
  std::vector<int> slots;      // Tensors, OptionalTensors (-1: None), Ints (-1: the constant below)
  std::vector<int64_t> ints;  // Ints: the constants
  // A float constant of float32's lowest or largest value: torch.finfo(x.dtype).min written into
  // the graph at export, where x was float32 (Hugging Face's attention masks). Under autocast x is
  // bfloat16 or half, as in PyTorch eager, where finfo gives that type's extreme: so does this
  // (float32's would not fit, and masked_fill refuses it). -1 lowest, 1 largest, 0 neither.
  int extreme = 0;
};

// The Python integer arithmetic a dynamic shape leaves in a graph (x.shape[0] * 2).
enum class IntOp { None, Add, Sub, Mul, FloorDiv, Mod };

struct Output {
  int slot = -1;           // a single value; -1 when unused
  std::vector<int> slots;  // a list return (split, unbind): one slot per element
  bool list = false;
};

struct Node {
  std::string name, target, source;
  std::optional<c10::OperatorHandle> op;
  IntOp int_op = IntOp::None;
  std::vector<Arg> args;
  std::vector<Output> outputs;
  std::vector<int> release;  // slots whose last reader is this node
  // An in-place detach_ run as detach: its result replaces its argument's value too.
  bool writes_back = false;
  // aten::dropout: on the CPU, models/fast_dropout.h's (ATen's draws a Bernoulli per element
  // from a sequential generator, 15% of a BERT step).
  bool fast_dropout = false;
  // aten::scaled_dot_product_attention: with dropout on the CPU, attention_with_dropout's.
  bool attention = false;
};

// "File "net.py", line 9, in forward\n    y = self.fc(x)" -> "net.py:9 (y = self.fc(x))": the
// outermost frame, the user's own forward.
std::string source_of(const json& node) {
  const auto meta = node.find("metadata");
  if (meta == node.end() || !meta->is_object()) return "";
  const std::string trace = meta->value("stack_trace", "");
  const auto file = trace.find("File \"");
  if (file == std::string::npos) return "";
  const auto file_end = trace.find('"', file + 6);
  const auto line = trace.find("line ", file_end);
  if (file_end == std::string::npos || line == std::string::npos) return "";
  std::string where = trace.substr(file + 6, file_end - file - 6);
  where = where.substr(where.rfind('/') + 1);
  const auto comma = trace.find(',', line);
  std::string out = where + ":" + trace.substr(line + 5, comma - line - 5);
  const auto code = trace.find('\n', line);
  if (code != std::string::npos) {
    auto text = trace.substr(code + 1, trace.find('\n', code + 1) - code - 1);
    text.erase(0, text.find_first_not_of(' '));
    if (!text.empty()) out += " (" + text + ")";
  }
  return out;
}

// {"kind": value}, the shape of every union in the export schema; anything else is malformed.
std::pair<std::string, const json*> one_of(const json& j) {
  if (!j.is_object() || j.size() != 1) throw json::type_error::create(302, "expected an object of one key", &j);
  return {j.begin().key(), &j.begin().value()};
}

// A float as the serializer writes it: a number, or "Infinity", "-Infinity", "NaN" (a causal
// mask's -inf, say).
double number(const json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  return v.get<double>();
}

// A number where the schema wants a Tensor (add_(buffer, 1)): a wrapped number, as Python passes
// it, so that type promotion treats it as a scalar.
c10::IValue wrapped(const at::Scalar& s) {
  auto t = c10::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// The lowest (sign < 0) or largest value of a reduced float type, as the constant it replaces is
// passed: a wrapped number where a Tensor goes, else a double.
c10::IValue extreme_of(c10::ScalarType t, int sign, bool as_tensor) {
  const double v = t == c10::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::max())
                                       : static_cast<double>(std::numeric_limits<c10::Half>::max());
  return as_tensor ? wrapped(at::Scalar(sign * v)) : c10::IValue(sign * v);
}

bool wants_tensor(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) return wants_tensor(type->castRaw<c10::OptionalType>()->getElementType());
  return type->kind() == c10::TypeKind::TensorType;
}

bool wants_float(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) return wants_float(type->castRaw<c10::OptionalType>()->getElementType());
  return type->kind() == c10::TypeKind::FloatType;
}

}  // namespace

struct ExportedGraph::Impl {
  std::string path;
  std::vector<GraphInput> inputs;
  std::vector<int> input_slots;
  std::vector<std::string> output_names;
  std::vector<std::vector<int64_t>> output_shapes;
  std::vector<std::string> mutated;
  std::vector<int> output_slots;  // the user outputs, then the mutated buffers
  std::vector<Node> nodes;
  std::unordered_map<std::string, int> slot_of;
  int slots = 0;

  int slot(const std::string& name) {
    auto [it, added] = slot_of.emplace(name, slots);
    if (added) ++slots;
    return it->second;
  }
  int existing(const std::string& name, const Node& n) const {
    const auto it = slot_of.find(name);
    if (it == slot_of.end()) throw fail(n, "reads '" + name + "', which no earlier node or input defines");
    return it->second;
  }

  Error fail(const Node& n, const std::string& why,
             const std::string& hint = "export a model whose forward uses ATen operators only (no custom ops, no "
                                       "torch.cond or torch.map): tools/export_model.py checks this before it saves") const {
    return usage_error(fmt::format("{}: node '{}' ({}){}: {}", path, n.name, n.target,
                                   n.source.empty() ? "" : " from " + n.source, why),
                       hint);
  }

  // The shape of a graph value from tensor_values: {"as_int": n} or {"as_expr": ...} (-1).
  // Each dimension's largest size: a fixed one's own, a dynamic one's range_constraints maximum
  // (-1 when it has none).
  static std::vector<int64_t> largest_sizes(const json& program, const json& graph, const std::string& name) {
    std::vector<int64_t> out;
    static const std::regex symbol(R"(^(?:Symbol\('([A-Za-z_0-9]+)'.*|([A-Za-z_][A-Za-z_0-9]*))$)");
    for (const auto& d : graph.at("tensor_values").at(name).at("sizes")) {
      if (d.contains("as_int")) {
        out.push_back(d.at("as_int").get<int64_t>());
        continue;
      }
      int64_t top = -1;
      std::smatch m;
      const std::string expr = d.at("as_expr").at("expr_str").get<std::string>();
      if (std::regex_match(expr, m, symbol) && program.contains("range_constraints")) {
        const std::string sym = m[1].matched ? m[1].str() : m[2].str();
        const auto& ranges = program.at("range_constraints");
        if (ranges.contains(sym) && ranges.at(sym).at("max_val").is_number_integer())
          top = ranges.at(sym).at("max_val").get<int64_t>();
      }
      out.push_back(top);
    }
    return out;
  }

  // The user outputs' names from the module's out_spec (a pytree TreeSpec as JSON text): the
  // keys of a flat dict or of a Hugging Face ModelOutput (whose context lists its keys too),
  // else positions.
  static std::vector<std::string> names_of_outputs(const json& module, size_t count) {
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) names.push_back(std::to_string(i));
    try {
      for (const auto& call : module.at("module_call_graph"))
        if (call.at("fqn").get<std::string>().empty()) {
          const json spec = json::parse(call.at("signature").at("out_spec").get<std::string>());
          const json& tree = spec.at(1);
          if (tree.at("type").is_string() && tree.at("context").is_string()) {
            const json keys = json::parse(tree.at("context").get<std::string>());
            if (keys.is_array() && keys.size() == count)
              for (size_t i = 0; i < count; ++i)
                if (keys[i].is_string()) names[i] = keys[i].get<std::string>();
          }
        }
    } catch (const json::exception&) {
      // No readable out_spec: the outputs keep their positions as names.
    }
    return names;
  }

  static std::vector<int64_t> shape_of(const json& graph, const std::string& name) {
    std::vector<int64_t> shape;
    for (const auto& d : graph.at("tensor_values").at(name).at("sizes"))
      shape.push_back(d.contains("as_int") ? d.at("as_int").get<int64_t>() : -1);
    return shape;
  }

  Arg arg(const json& a, const c10::Argument& schema, const Node& n) {
    Arg r;
    const auto& type = schema.type();
    const auto [kind, value] = one_of(a);
    const json& v = *value;
    auto named = [&](const json& x) { return existing(x.at("name").get<std::string>(), n); };
    if (kind == "as_none") {
      r.constant = c10::IValue();
    } else if (kind == "as_tensor") {
      r.kind = Arg::Kind::Slot;
      r.slot = named(v);
    } else if (kind == "as_optional_tensor") {
      if (v.contains("as_tensor")) {
        r.kind = Arg::Kind::Slot;
        r.slot = named(v.at("as_tensor"));
      }
    } else if (kind == "as_tensors" || kind == "as_optional_tensors") {
      r.kind = kind == "as_tensors" ? Arg::Kind::Tensors : Arg::Kind::OptionalTensors;
      for (const auto& t : v) {
        if (kind == "as_tensors") r.slots.push_back(named(t));
        else r.slots.push_back(t.contains("as_tensor") ? named(t.at("as_tensor")) : -1);
      }
    } else if (kind == "as_int" || kind == "as_float" || kind == "as_bool") {
      const at::Scalar s = kind == "as_int" ? at::Scalar(v.get<int64_t>())
                           : kind == "as_float" ? at::Scalar(number(v))
                                                : at::Scalar(v.get<bool>());
      if (kind == "as_float" && std::abs(number(v)) == std::numeric_limits<float>::max()) r.extreme = number(v) < 0 ? -1 : 1;
      if (wants_tensor(type)) r.constant = wrapped(s);
      else if (wants_float(type)) r.constant = s.toDouble();
      else r.constant = kind == "as_int" ? c10::IValue(v.get<int64_t>())
                        : kind == "as_float" ? c10::IValue(number(v))
                                             : c10::IValue(v.get<bool>());
    } else if (kind == "as_ints") {
      r.constant = v.get<std::vector<int64_t>>();
    } else if (kind == "as_floats") {
      std::vector<double> list;
      for (const auto& x : v) list.push_back(number(x));
      r.constant = list;
    } else if (kind == "as_bools") {
      c10::List<bool> list;
      for (const auto& b : v) list.push_back(b.get<bool>());
      r.constant = list;
    } else if (kind == "as_string") {
      r.constant = v.get<std::string>();
    } else if (kind == "as_strings") {
      r.constant = v.get<std::vector<std::string>>();
    } else if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") {
      const auto [inner, x] = one_of(v);
      if (inner == "as_name") {
        // x.shape[0] * t: a size where a Tensor goes is wrapped at run time, as Python does.
        r.kind = wants_tensor(type) ? Arg::Kind::Wrapped : Arg::Kind::Slot;
        r.slot = existing(x->get<std::string>(), n);
      } else {
        return arg(json{{kind == "as_sym_int" ? "as_int" : kind == "as_sym_float" ? "as_float" : "as_bool", *x}},
                   schema, n);
      }
    } else if (kind == "as_sym_ints") {
      r.kind = Arg::Kind::Ints;
      for (const auto& x : v) {
        const bool name = x.contains("as_name");
        r.slots.push_back(name ? existing(x.at("as_name").get<std::string>(), n) : -1);
        r.ints.push_back(name ? 0 : x.at("as_int").get<int64_t>());
      }
    } else if (kind == "as_scalar_type") {
      const auto t = export_scalar_type(v.get<int64_t>());
      if (!t) throw fail(n, fmt::format("dtype {} is not one gputrain trains with", v.dump()));
      r.constant = static_cast<int64_t>(*t);
    } else if (kind == "as_memory_format") {
      const auto f = export_memory_format(v.get<int64_t>());
      if (!f) throw fail(n, fmt::format("unknown memory format {}", v.dump()));
      r.constant = static_cast<int64_t>(*f);
    } else if (kind == "as_layout") {
      const auto l = export_layout(v.get<int64_t>());
      if (!l) throw fail(n, fmt::format("layout {} is not one gputrain trains with", v.dump()));
      r.constant = static_cast<int64_t>(*l);
    } else if (kind == "as_device") {
      // The device the program was exported on: here it is the model's own.
      r.kind = Arg::Kind::Device;
    } else {
      throw fail(n, "argument '" + schema.name() + "' is of kind '" + kind + "', which gputrain cannot pass");
    }
    return r;
  }

  // module.eval() on a training-form graph: every operator's train/training flag off (dropout,
  // batch_norm, rrelu, lstm, ...), attention's dropout_p 0, and instance_norm on its running
  // statistics, except where there are none (a norm without running statistics keeps using the
  // batch's, as PyTorch's eval() does).
  static json eval_form(const std::string& target, const std::string& arg, const json& value,
                        const std::unordered_map<std::string, json>& given) {
    auto none = [&](const char* name) {
      const auto it = given.find(name);
      return it == given.end() || it->second.contains("as_none");
    };
    const bool norm = target.find("batch_norm") != std::string::npos || target.find("instance_norm") != std::string::npos;
    if ((arg == "training" || arg == "train") && !(norm && none("running_mean"))) return json{{"as_bool", false}};
    if (arg == "use_input_stats" && !none("running_mean")) return json{{"as_bool", false}};
    if (arg == "dropout_p") return json{{"as_float", 0.0}};
    return value;
  }

  void compile_node(const json& j, bool eval, const std::vector<std::string>& slot_buffer) {
    Node n;
    n.name = j.at("name").get<std::string>();
    n.target = j.at("target").get<std::string>();
    n.source = source_of(j);
    // Named inputs, by the schema's argument names.
    std::unordered_map<std::string, json> given;
    std::vector<json> positional;
    for (const auto& in : j.at("inputs")) {
      given[in.at("name").get<std::string>()] = in.at("arg");
      positional.push_back(in.at("arg"));
    }
    static const std::unordered_map<std::string, IntOp> int_ops = {{"_operator.add", IntOp::Add},
                                                                   {"_operator.sub", IntOp::Sub},
                                                                   {"_operator.mul", IntOp::Mul},
                                                                   {"_operator.floordiv", IntOp::FloorDiv},
                                                                   {"_operator.mod", IntOp::Mod}};
    if (auto it = int_ops.find(n.target); it != int_ops.end()) {
      n.int_op = it->second;
      if (positional.size() != 2) throw fail(n, "expected two operands");
      static const c10::Argument int_arg("x", c10::IntType::get());
      for (const auto& a : positional) n.args.push_back(arg(a, int_arg, n));
    } else {
      const std::string prefix = "torch.ops.";
      if (n.target.rfind("torch.ops.higher_order.", 0) == 0)
        throw fail(n, "a higher-order operator needs Python to run (control flow or a wrapped function)");
      if (n.target.rfind(prefix, 0) != 0) throw fail(n, "a Python function, not an operator");
      // torch.ops.<ns>.<name>.<overload>; "default" is the overload named "".
      const std::string rest = n.target.substr(prefix.size());
      const auto dot1 = rest.find('.'), dot2 = rest.rfind('.');
      if (dot1 == std::string::npos || dot2 == dot1) throw fail(n, "not an operator name");
      const std::string ns = rest.substr(0, dot1);
      std::string op = rest.substr(dot1 + 1, dot2 - dot1 - 1);
      std::string overload = rest.substr(dot2 + 1);
      if (overload == "default") overload = "";
      // detach_ of a tensor the graph made (Hugging Face's DeBERTa detaches a constant it
      // lifted) stays in that tensor: it runs as detach, whose result takes the argument's place.
      // Of a graph input, a parameter say, it would change module state, and is refused below.
      if (n.target == "torch.ops.aten.detach_.default" && positional.size() == 1 && positional[0].contains("as_tensor")) {
        const auto it = slot_of.find(positional[0].at("as_tensor").at("name").get<std::string>());
        if (it != slot_of.end() && std::find(input_slots.begin(), input_slots.end(), it->second) == input_slots.end()) {
          op = "detach";
          n.writes_back = true;
        }
      }
      n.op = c10::Dispatcher::singleton().findSchema({ns + "::" + op, overload});
      n.fast_dropout = n.target == "torch.ops.aten.dropout.default";
      n.attention = n.target == "torch.ops.aten.scaled_dot_product_attention.default";
      if (!n.op)
        throw fail(n, ns == "aten" ? "this LibTorch has no such operator (export with the torch gputrain was built on)"
                                   : "a custom operator ('" + ns + "' namespace) is not registered in gputrain");
      // A program is data: an operator that reaches files, the console or the process's state is
      // refused here, before any node runs (models/op_allowlist.h).
      if (!op_admitted(n.op->operator_name())) {
        const std::string why = op_refusal(n.op->schema());
        throw fail(n, why.empty() ? "registered after gputrain listed the operators it runs" : why,
                   fmt::format("gputrain runs a graph as data: it calls only the {} aten and prims operators whose "
                               "effects stay in their tensors; take this call out of the model's forward",
                               admitted_op_count()));
      }
      const auto& schema = n.op->schema();
      for (const auto& [name, value] : given)
        if (!schema.argumentIndexWithName(name))
          throw fail(n, "passes '" + name + "', which " + schema.operator_name().name + " does not take");
      for (const auto& a : schema.arguments()) {
        json value;
        if (auto it = given.find(a.name()); it != given.end()) {
          value = it->second;
        } else if (a.default_value()) {
          Arg d;
          d.constant = *a.default_value();
          n.args.push_back(d);
          continue;
        } else {
          throw fail(n, "argument '" + a.name() + "' is missing");
        }
        if (eval) value = eval_form(n.target, a.name(), value, given);
        n.args.push_back(arg(value, a, n));
      }
      // eval: num_batches_tracked += 1 is the one buffer update outside batch_norm.
      if (eval && n.target == "torch.ops.aten.add_.Tensor" && n.args[0].kind == Arg::Kind::Slot &&
          n.args[0].slot < static_cast<int>(slot_buffer.size()) &&
          slot_buffer[n.args[0].slot].find("num_batches_tracked") != std::string::npos)
        return;  // (its output is never read in a training-form graph)
    }
    for (const auto& out : j.at("outputs")) {
      Output o;
      const auto [kind, value] = one_of(out);
      const json& v = *value;
      if (kind == "as_tensor") {
        o.slot = slot(v.at("name").get<std::string>());
      } else if (kind == "as_tensors") {
        o.list = true;
        for (const auto& t : v) o.slots.push_back(slot(t.at("name").get<std::string>()));
      } else if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") {
        const auto [inner, x] = one_of(v);
        if (inner == "as_name") o.slot = slot(x->get<std::string>());
      } else if (kind != "as_none") {
        throw fail(n, "an output of kind '" + kind + "', which gputrain cannot hold");
      }
      n.outputs.push_back(std::move(o));
    }
    if (n.op && n.outputs.size() > n.op->schema().returns().size()) throw fail(n, "more outputs than its operator returns");
    nodes.push_back(std::move(n));
  }

  // Each slot's last reader releases it (the graph's outputs are never released).
  void plan_releases() {
    std::vector<int> last(slots, -1);
    for (size_t i = 0; i < nodes.size(); ++i)
      for (const auto& a : nodes[i].args) {
        if (a.slot >= 0) last[a.slot] = static_cast<int>(i);
        for (int s : a.slots)
          if (s >= 0) last[s] = static_cast<int>(i);
      }
    // A value no node reads (the indices of max.dim, an LSTM's final states) goes right after
    // the node that made it.
    for (size_t i = 0; i < nodes.size(); ++i)
      for (const auto& o : nodes[i].outputs) {
        if (o.slot >= 0 && last[o.slot] < 0) last[o.slot] = static_cast<int>(i);
        for (int s : o.slots)
          if (last[s] < 0) last[s] = static_cast<int>(i);
      }
    for (int s : output_slots) last[s] = -1;
    for (int s = 0; s < slots; ++s)
      if (last[s] >= 0) nodes[last[s]].release.push_back(s);
  }
};

ExportedGraph::ExportedGraph(const json& program, const std::string& path, bool eval) : impl_(std::make_unique<Impl>()) {
  Impl& g = *impl_;
  g.path = path;
  try {
    // Training-form programs keep conv2d, linear, batch_norm (what autocast knows); a decomposed
    // or inference program's aten.convolution would not autocast.
    const auto& verifiers = program.at("verifiers");
    if (std::find(verifiers.begin(), verifiers.end(), "TRAINING") == verifiers.end())
      throw usage_error(path + ": a program exported for inference (verifier " + verifiers.dump().substr(0, 80) + "), not training",
                        "export with torch.export.export(model.train(), ...) and save it before run_decompositions "
                        "(tools/export_model.py does)");
    const auto& module = program.at("graph_module");
    const auto& graph = module.at("graph");
    const auto& signature = module.at("signature");
    const auto& specs = signature.at("input_specs");
    const auto& names = graph.at("inputs");
    if (specs.size() != names.size()) throw usage_error(path + ": the signature and the graph disagree on the inputs", kPt2Hint);
    std::vector<std::string> slot_buffer;
    for (size_t i = 0; i < specs.size(); ++i) {
      const auto [kind, spec_value] = one_of(specs[i]);
      const auto& s = *spec_value;
      GraphInput in;
      std::string arg;
      if (kind == "parameter") {
        in = {GraphInput::Kind::Parameter, s.at("parameter_name").get<std::string>()};
        arg = s.at("arg").at("name").get<std::string>();
      } else if (kind == "buffer") {
        in = {GraphInput::Kind::Buffer, s.at("buffer_name").get<std::string>()};
        arg = s.at("arg").at("name").get<std::string>();
      } else if (kind == "tensor_constant") {
        in = {GraphInput::Kind::Constant, s.at("tensor_constant_name").get<std::string>()};
        arg = s.at("arg").at("name").get<std::string>();
      } else if (kind == "user_input" && s.at("arg").contains("as_tensor")) {
        arg = s.at("arg").at("as_tensor").at("name").get<std::string>();
        in = {GraphInput::Kind::User, arg};
        const auto dtype = export_scalar_type(graph.at("tensor_values").at(arg).at("dtype").get<int64_t>());
        if (!dtype || (!c10::isFloatingType(*dtype) && *dtype != c10::kLong && *dtype != c10::kInt && *dtype != c10::kBool))
          throw usage_error(path + ": the model's input '" + arg + "' is " +
                                (dtype ? std::string(c10::toString(*dtype)) : "of an unknown dtype") +
                                "; gputrain's fields are float32 or int64",
                            "take float or integer (int64) inputs");
        in.dtype = *dtype;
        in.largest = Impl::largest_sizes(program, graph, arg);
      } else {
        throw usage_error(path + ": a graph input of kind '" + kind + "' (gputrain feeds tensors by name and the module's "
                                 "own parameters, buffers and constants)",
                          "export a forward whose arguments are tensors");
      }
      in.shape = Impl::shape_of(graph, arg);
      const int slot = g.slot(arg);
      if (in.kind == GraphInput::Kind::Buffer) {
        slot_buffer.resize(slot + 1);
        slot_buffer[slot] = in.name;
      }
      g.inputs.push_back(in);
      g.input_slots.push_back(slot);
    }
    if (std::none_of(g.inputs.begin(), g.inputs.end(), [](const GraphInput& in) { return in.kind == GraphInput::Kind::User; }))
      throw usage_error(path + ": the model's forward takes no tensor input", kPt2Hint);
    for (const auto& node : graph.at("nodes")) g.compile_node(node, eval, slot_buffer);
    std::vector<std::string> outs;
    for (const auto& spec : signature.at("output_specs")) {
      const auto [kind, spec_value] = one_of(spec);
      const auto& s = *spec_value;
      if (kind == "user_output" && s.at("arg").contains("as_tensor")) {
        outs.push_back(s.at("arg").at("as_tensor").at("name").get<std::string>());
      } else if (kind == "buffer_mutation") {
        g.mutated.push_back(s.at("buffer_name").get<std::string>());
      } else {
        throw usage_error(path + ": a graph output of kind '" + kind + "', which gputrain cannot train",
                          "return tensors: one, a tuple or a dict of them");
      }
    }
    if (outs.empty()) throw usage_error(path + ": the model's forward returns no tensor", kPt2Hint);
    g.output_names = Impl::names_of_outputs(module, outs.size());
    auto output_slot = [&](const std::string& name) {
      const auto it = g.slot_of.find(name);
      if (it == g.slot_of.end()) throw usage_error(path + ": the output '" + name + "' is no node's", kPt2Hint);
      return it->second;
    };
    for (const auto& out : outs) {
      g.output_shapes.push_back(Impl::shape_of(graph, out));
      g.output_slots.push_back(output_slot(out));
    }
    for (const auto& spec : signature.at("output_specs"))
      if (one_of(spec).first == "buffer_mutation")
        g.output_slots.push_back(output_slot(one_of(spec).second->at("arg").at("name").get<std::string>()));
    g.plan_releases();
  } catch (const json::exception& e) {
    throw usage_error(path + ": malformed program (" + std::string(e.what()) + ")", kPt2Hint);
  }
}

ExportedGraph::~ExportedGraph() = default;
ExportedGraph::ExportedGraph(ExportedGraph&&) noexcept = default;

const std::vector<GraphInput>& ExportedGraph::inputs() const { return impl_->inputs; }
std::vector<const GraphInput*> ExportedGraph::user_inputs() const {
  std::vector<const GraphInput*> out;
  for (const auto& in : impl_->inputs)
    if (in.kind == GraphInput::Kind::User) out.push_back(&in);
  return out;
}
const std::vector<std::string>& ExportedGraph::output_names() const { return impl_->output_names; }
const std::vector<std::vector<int64_t>>& ExportedGraph::output_shapes() const { return impl_->output_shapes; }
const std::vector<std::string>& ExportedGraph::mutated_buffers() const { return impl_->mutated; }

int64_t ExportedGraph::embedding_rows(const std::string& name) const {
  const Impl& g = *impl_;
  const auto user = g.slot_of.find(name);
  if (user == g.slot_of.end()) return -1;
  // The input and what only reshapes it (GPT-2 views its ids before the embedding).
  std::set<int> same = {user->second};
  static const std::set<std::string> reshapes = {"torch.ops.aten.view.default", "torch.ops.aten.reshape.default",
                                                 "torch.ops.aten._unsafe_view.default", "torch.ops.aten.clone.default",
                                                 "torch.ops.aten.contiguous.default", "torch.ops.aten.flatten.using_ints"};
  for (const auto& n : g.nodes)
    if (reshapes.count(n.target) && !n.args.empty() && n.args[0].kind == Arg::Kind::Slot && same.count(n.args[0].slot) &&
        !n.outputs.empty() && n.outputs[0].slot >= 0)
      same.insert(n.outputs[0].slot);
  int64_t rows = -1;
  for (const auto& n : g.nodes)
    if (n.target == "torch.ops.aten.embedding.default" && n.args.size() >= 2 && n.args[1].kind == Arg::Kind::Slot &&
        same.count(n.args[1].slot) && n.args[0].kind == Arg::Kind::Slot)
      for (size_t i = 0; i < g.inputs.size(); ++i)
        if (g.input_slots[i] == n.args[0].slot && g.inputs[i].shape.size() == 2)
          rows = rows < 0 ? g.inputs[i].shape[0] : std::min(rows, g.inputs[i].shape[0]);
  return rows;
}

std::vector<at::Tensor> ExportedGraph::run(std::vector<c10::IValue> bound, c10::Device device) const {
  const Impl& g = *impl_;
  std::vector<c10::IValue> slots(g.slots);
  for (size_t i = 0; i < bound.size(); ++i) slots[g.input_slots[i]] = std::move(bound[i]);
  torch::jit::Stack stack;
  for (const auto& n : g.nodes) {
    stack.clear();
    for (const auto& a : n.args) {
      switch (a.kind) {
        case Arg::Kind::Const:
          if (a.extreme != 0 && !stack.empty() && stack[0].isTensor() && at::isReducedFloatingType(stack[0].toTensor().scalar_type()))
            stack.push_back(extreme_of(stack[0].toTensor().scalar_type(), a.extreme, a.constant.isTensor()));
          else
            stack.push_back(a.constant);
          break;
        case Arg::Kind::Slot: stack.push_back(slots[a.slot]); break;
        case Arg::Kind::Wrapped: stack.push_back(wrapped(slots[a.slot].toScalar())); break;
        case Arg::Kind::Device: stack.emplace_back(device); break;
        case Arg::Kind::Tensors: {
          c10::List<at::Tensor> list;
          list.reserve(a.slots.size());
          for (int s : a.slots) list.push_back(slots[s].toTensor());
          stack.emplace_back(std::move(list));
          break;
        }
        case Arg::Kind::OptionalTensors: {
          c10::List<std::optional<at::Tensor>> list;
          for (int s : a.slots) list.push_back(s < 0 ? std::nullopt : std::optional<at::Tensor>(slots[s].toTensor()));
          stack.emplace_back(std::move(list));
          break;
        }
        case Arg::Kind::Ints: {
          std::vector<int64_t> v(a.ints);
          for (size_t i = 0; i < v.size(); ++i)
            if (a.slots[i] >= 0) v[i] = slots[a.slots[i]].toInt();
          stack.emplace_back(std::move(v));
          break;
        }
      }
    }
    if (n.int_op != IntOp::None) {
      const int64_t x = stack[0].toInt(), y = stack[1].toInt();
      int64_t r = 0;
      bool overflow = false;
      switch (n.int_op) {
        case IntOp::Add: overflow = __builtin_add_overflow(x, y, &r); break;
        case IntOp::Sub: overflow = __builtin_sub_overflow(x, y, &r); break;
        case IntOp::Mul: overflow = __builtin_mul_overflow(x, y, &r); break;
        default: {  // Python's floor division and modulo round toward minus infinity
          if (y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1)) {
            overflow = true;
            break;
          }
          const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
          r = n.int_op == IntOp::FloorDiv ? q : x - q * y;
        }
      }
      if (overflow) throw std::invalid_argument("node '" + n.name + "' (" + n.target + "): integer overflow or division by zero");
      stack.clear();
      stack.emplace_back(r);
    } else {
      try {
        if (n.fast_dropout && stack[0].toTensor().device().is_cpu()) {
          auto out = fast_dropout(stack[0].toTensor(), stack[1].toDouble(), stack[2].toBool());
          stack.clear();
          stack.emplace_back(std::move(out));
        } else if (n.attention && stack.size() == 8 && stack[4].toDouble() > 0 && stack[0].toTensor().device().is_cpu()) {
          // (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
          auto out = attention_with_dropout(stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor(),
                                            stack[3].toOptional<at::Tensor>(), stack[4].toDouble(), stack[5].toBool(),
                                            stack[6].toOptional<double>(), stack[7].toBool());
          stack.clear();
          stack.emplace_back(std::move(out));
        } else {
          n.op->callBoxed(stack);
        }
      } catch (const c10::OutOfMemoryError&) {
        throw;
      } catch (const c10::Error& e) {
        const std::string what = e.what_without_backtrace();
        throw std::invalid_argument(fmt::format("node '{}' ({}){}: {}", n.name, n.target,
                                                n.source.empty() ? "" : " from " + n.source,
                                                what.substr(0, what.find('\n'))));
      }
    }
    for (size_t i = 0; i < n.outputs.size() && i < stack.size(); ++i) {
      const Output& o = n.outputs[i];
      if (o.list) {
        const auto list = stack[i].toTensorList();
        if (list.size() != o.slots.size())
          throw std::invalid_argument(fmt::format("node '{}' ({}) returned {} tensors, the graph names {}", n.name, n.target,
                                                  list.size(), o.slots.size()));
        for (size_t k = 0; k < o.slots.size(); ++k) slots[o.slots[k]] = list.get(k);
      } else if (o.slot >= 0) {
        if (n.writes_back) slots[n.args[0].slot] = stack[i];
        slots[o.slot] = std::move(stack[i]);
      }
    }
    for (int s : n.release) slots[s] = c10::IValue();
  }
  std::vector<at::Tensor> out;
  for (int s : g.output_slots) out.push_back(slots[s].toTensor());
  return out;
}

}  // namespace gputrain
