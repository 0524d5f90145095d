// The allowlist of operators for graphs from files, built from the operator schemas at run time.
//
// How it is built: once per process, from every operator registered with the c10 dispatcher
// (what findSchema can return, so what a graph could name), an operator is admitted when
//   (a) its namespace is aten or prims: other namespaces hold collectives (c10d), the profiler
//       (profiler::_record_function_enter), quantized and backend kernels, and whatever a
//       library loaded into the process registers;
//   (b) none of its arguments names a file (a str argument called filename, path, dir, url, ...;
//       only str ones: einsum's int[] `path` is a contraction order) and none is a Storage (set_
//       on a Storage aliases memory the graph was not given);
//   (c) it is not on the denylist below, the operators whose effects reach outside their
//       tensors (files, the console, process-wide or autograd state), found by reading the
//       schemas of all the aten operators torch 2.15 registers (those returning nothing first);
//   (d) it checks what it is given: no "unsafe" or "sparse" in its name (sparse tensors trust
//       their indices), no `unsafe` or `check_invariants` argument, and none of the unchecked
//       views on the denylist (a graph could otherwise
//       point a tensor outside its memory: a red-team file crashed a run with _reshape_alias).
// Why at run time: the list follows the LibTorch gputrain runs on (2.15 here, 2.11 on the GPU
// machines) instead of a copy that goes stale, and a new operator of aten is admitted only if
// its schema passes the same rule. Random operators (dropout, bernoulli_) are admitted: they
// advance the global generator, as the same model does in PyTorch. With torch 2.15 this admits
// 2960 schemas and refuses 160 of aten's 3120 (prims are registered from Python, so a C++
// process has none); tests/python/op_allowlist_check.py restates the rule, counts the same, and
// checks the 17 torchvision and timm architectures that train through .pt2 against it.
#include "models/op_allowlist.h"

#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <ATen/core/dispatch/Dispatcher.h>

namespace gputrain {
namespace {

// By name, every overload, with what each reaches. A name that is not a dispatcher operator in
// this LibTorch is listed all the same where an older or newer one may register it.
const std::unordered_map<std::string_view, std::string_view> kDenied = {
    {"aten::from_file", "it maps a file (shared=True creates it and writes the tensor to it)"},
    {"aten::_print", "it writes to stdout"},
    {"aten::_test_warn_in_autograd", "a test operator that emits a warning"},
    // Process-wide state.
    {"aten::_cufft_set_plan_cache_max_size", "it resizes a device's cuFFT plan cache"},
    {"aten::_cufft_clear_plan_cache", "it clears a device's cuFFT plan cache"},
    {"aten::record_stream", "it changes when the caching allocator frees a block"},
    // Autograd state that belongs to the training step, not the forward: a backward pass run
    // inside the graph, and a tensor's identity or requires_grad (a parameter's, which the
    // optimizer holds).
    {"aten::_backward", "it runs a backward pass, writing the parameters' gradients"},
    {"aten::set_data", "it swaps a tensor's data (a parameter's) under autograd"},
    {"aten::requires_grad_", "it turns a tensor's (a parameter's) gradient on or off"},
    {"aten::retain_grad", "it changes a tensor's autograd state"},
    {"aten::detach_", "it detaches a tensor (a parameter) in place"},
    // Views and constructors that trust their sizes, strides or indices: a file could point
    // them outside the memory they were given (the red team crashed a run with _reshape_alias).
    {"aten::_reshape_alias", "it makes a view without checking it against the tensor's memory"},
    {"aten::_reshape_alias_copy", "it reads through a view it does not check against the tensor's memory"},
    {"aten::set_", "it points a tensor at other memory"},
    {"aten::_nested_view_from_buffer", "it makes a view without checking it against the buffer"},
    {"aten::_nested_view_from_buffer_copy", "it reads through a view it does not check against the buffer"},
    {"aten::_nested_view_from_jagged", "it trusts its offsets"},
    {"aten::_nested_view_from_jagged_copy", "it trusts its offsets"},
    {"aten::_index_put_impl_", "its unsafe flag skips the bounds checks of its indices"},
    // TorchScript's own operators, not dispatcher operators today.
    {"aten::save", "it writes a file"},
    {"aten::warn", "it emits a warning"},
    {"aten::manual_seed", "it reseeds the global generator"},
    {"aten::seed", "it reseeds the global generator"},
    {"aten::set_grad_enabled", "it switches autograd for the thread"},
    {"aten::set_num_threads", "it changes the process's thread count"},
    {"aten::set_num_interop_threads", "it changes the process's thread count"},
};

// Any element type of `type` (an Optional's, a List's) of kind `kind`.
bool holds(const c10::TypePtr& type, c10::TypeKind kind) {
  if (type->kind() == kind) return true;
  for (const auto& inner : type->containedTypes())
    if (holds(inner, kind)) return true;
  return false;
}

bool names_a_file(std::string_view name) {
  for (std::string_view word : {"file", "path", "dir", "folder", "url"})
    if (name.find(word) != std::string_view::npos) return true;
  return false;
}

const std::unordered_set<c10::OperatorName>& allowlist() {
  static const std::unordered_set<c10::OperatorName> admitted = [] {
    std::unordered_set<c10::OperatorName> names;
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const auto& name : dispatcher.getAllOpNames()) {
      const auto op = dispatcher.findSchema(name);  // an operator with kernels but no schema cannot be called
      if (op && op_refusal(op->schema()).empty()) names.insert(name);
    }
    return names;
  }();
  return admitted;
}

}  // namespace

std::string op_refusal(const c10::FunctionSchema& schema) {
  const std::string& name = schema.name();
  const std::string ns = name.substr(0, name.find("::"));
  if (ns != "aten" && ns != "prims")
    return "an operator of the '" + ns + "' namespace; graphs from files may call aten and prims operators only";
  if (const auto it = kDenied.find(name); it != kDenied.end())
    return name + " reaches outside its tensors: " + std::string(it->second);
  // Operators that skip their checks by name or by a flag (_unsafe_index, _sparse_*_unsafe,
  // sparse constructors with check_invariants).
  if (name.find("unsafe") != std::string::npos)
    return name + " skips the checks of its indices or sizes: a graph from a file could reach outside its tensors";
  // Sparse tensors are built on indices that nothing checks unless asked (check_invariants is
  // off by default): no vision or text model needs them.
  if (name.find("sparse") != std::string::npos)
    return name + " makes or reads a sparse tensor, whose indices go unchecked: a graph from a file could reach "
                  "outside its tensors";
  for (const auto& a : schema.arguments()) {
    if (a.name() == "unsafe" || a.name() == "check_invariants")
      return name + " can skip its bounds checks ('" + a.name() + "'): a graph from a file could reach outside its tensors";
    if (holds(a.type(), c10::TypeKind::StringType) && names_a_file(a.name()))
      return name + " takes a file name ('" + a.name() + "'): a graph from a file must not reach the file system";
    if (holds(a.type(), c10::TypeKind::StorageType))
      return name + " takes a Storage ('" + a.name() + "'): raw memory the graph was not given";
  }
  return "";
}

bool op_admitted(const c10::OperatorName& name) { return allowlist().count(name) > 0; }

size_t admitted_op_count() { return allowlist().size(); }

}  // namespace gputrain
