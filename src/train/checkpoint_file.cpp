// Reading a checkpoint as data. Both formats go through the weights-only unpickler (nothing in
// the file is called; no TorchScript is compiled), and then through walks that are bounded in
// depth and visit each object once, so that no file can drive recursion or repeated work.
#include "train/checkpoint_file.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/resolved.h"
#include "core/mapped_file.h"
#include "core/signals.h"
#include "core/text.h"
#include "core/zip.h"
#include "weights/pickle_writer.h"
#include "weights/torch_save.h"
#include "weights/torch_save_writer.h"
#include "weights/unpickler.h"

namespace gputrain {

const char* const kDamagedCheckpointHint =
    "the file is truncated, damaged or not from this model; use another checkpoint of the run (last.pt, best.pt, "
    "epoch-N.pt)";

namespace {

using Kind = PickleValue::Kind;

// A checkpoint's tree nests 5 deep (optimizer, state, index, name); module records in old
// formats one level per submodule. Deeper is not a checkpoint.
constexpr int kMaxDepth = 64;

// The largest TorchScript code file an old checkpoint may hold, inflated: its classes declare
// attributes only (a few hundred bytes each).
constexpr uint64_t kMaxCodeMember = 1 << 20;

// The longest name a tensor may have (module paths are a few dozen characters).
constexpr size_t kMaxName = 4096;

// The structure of an unpickled file, for lookups by key. Every container is entered at most
// once (`enter`), so a structure shared many times over (a "billion laughs" of memo references)
// costs no more than the file's own objects, and what the walks copy (names, indexes) is
// counted against the same budget as the unpickler's objects.
class Tree {
 public:
  Tree(const Unpickled& u, std::string path, uint64_t budget)
      : u_(u), path_(std::move(path)), budget_(budget), entered_(u.values.size(), false) {}

  const PickleValue& root() const { return u_.at(u_.root); }
  const PickleValue& at(size_t i) const { return u_.at(i); }

  [[noreturn]] void fail(const std::string& why) const {
    throw usage_error(fmt::format("checkpoint '{}' cannot be loaded: {}", path_, why), kDamagedCheckpointHint);
  }

  // Marks the container `i` as walked; a second walk of the same one is refused.
  void enter(size_t i, int depth) {
    if (depth > kMaxDepth) fail(fmt::format("it nests deeper than {} levels", kMaxDepth));
    if (entered_[i]) fail("it holds one structure in two places");
    entered_[i] = true;
    if (stop_signal() != 0)
      throw Error({fmt::format("checkpoint '{}': reading stopped by a signal", path_)}, "",
                  exit_code_for_signal(stop_signal()));
  }
  // Counts `bytes` the walk copies out of the file.
  void charge(uint64_t bytes) {
    if ((used_ += bytes) > budget_) fail("its names add up to more than its size allows");
  }

  // The value under string key `key` of dict `dict` (the last one, as in Python), or none.
  std::optional<size_t> find(const PickleValue& dict, std::string_view key) const {
    std::optional<size_t> found;
    if (dict.kind != Kind::Dict) return found;
    for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
      const PickleValue& k = at(dict.items[i]);
      if (k.kind == Kind::String && k.text == key) found = dict.items[i + 1];
    }
    return found;
  }
  const PickleValue& need(const PickleValue& dict, std::string_view key, std::string_view what) const {
    const auto i = find(dict, key);
    if (!i) fail(fmt::format("it holds no {} ('{}')", what, key));
    return at(*i);
  }
  const PickleValue& dict(const PickleValue& parent, std::string_view key) const {
    const PickleValue& v = need(parent, key, "dict");
    if (v.kind != Kind::Dict) fail(fmt::format("'{}' is not a dict", key));
    return v;
  }
  // Dict `i` (entered) by its string keys, the last of a repeated key winning: for the old
  // formats' many lookups ("params/0", "params/1", ...), each then a hash lookup.
  std::unordered_map<std::string_view, size_t> index(size_t i, int depth) {
    enter(i, depth);
    const PickleValue& d = at(i);
    if (d.kind != Kind::Dict) fail("an optimizer record is not a dict");
    charge(d.items.size() * 32);
    std::unordered_map<std::string_view, size_t> out;
    for (size_t k = 0; k + 1 < d.items.size(); k += 2)
      out[text(at(d.items[k]), "a key")] = d.items[k + 1];
    return out;
  }
  int64_t integer(const PickleValue& v, std::string_view what) const {
    if (v.kind == Kind::Int || v.kind == Kind::Bool) return v.integer;
    // Old formats keep counts such as "param_groups/size" as 0-d int64 tensors.
    if (v.kind == Kind::Tensor && v.tensor.numel() == 1 && !v.tensor.is_floating_point() && !v.tensor.is_meta())
      return v.tensor.item<int64_t>();
    fail(fmt::format("'{}' is not an integer", what));
  }
  double number(const PickleValue& v, std::string_view what) const {
    if (v.kind == Kind::Float) return v.number;
    if (v.kind == Kind::Int) return static_cast<double>(v.integer);
    fail(fmt::format("'{}' is not a number", what));
  }
  const std::string& text(const PickleValue& v, std::string_view what) const {
    if (v.kind != Kind::String) fail(fmt::format("'{}' is not a string", what));
    return v.text;
  }
  bool flag(const PickleValue& v, std::string_view what) const {
    if (v.kind != Kind::Bool) fail(fmt::format("'{}' is not a bool", what));
    return v.integer != 0;
  }
  // A tensor as gputrain writes them: its elements dense, none shared (a stride-0 view claiming
  // a huge shape over a few bytes would cost its claimed size in every later operation).
  torch::Tensor tensor(const PickleValue& v, std::string_view what) const {
    if (v.kind != Kind::Tensor) fail(fmt::format("'{}' is not a tensor", printable(std::string(what))));
    if (!v.tensor.is_non_overlapping_and_dense())
      fail(fmt::format("tensor '{}' is a view whose elements overlap or leave gaps", printable(std::string(what))));
    return v.tensor;
  }
  // A name from the file, counted: short enough for a message and a map.
  const std::string& name(const PickleValue& v, std::string_view what) {
    const std::string& n = text(v, what);
    if (n.size() > kMaxName) fail(fmt::format("a name of {} bytes", n.size()));
    charge(n.size() + 32);
    return n;
  }

  // The tensors under `dict`, named as Module names them: a format-3 dict of dotted names, or
  // the nested records of an old format (one per submodule) joined with dots. A name twice is
  // refused (which one would be meant?).
  void named_tensors(size_t dict, const std::string& prefix, NamedTensors& out, int depth = 0) {
    enter(dict, depth);
    const PickleValue& d = at(dict);
    if (d.kind != Kind::Dict) fail(fmt::format("'{}' is not a dict of tensors", printable(prefix)));
    for (size_t i = 0; i + 1 < d.items.size(); i += 2) {
      const std::string full = prefix + name(at(d.items[i]), "a tensor's name");
      charge(full.size());
      const PickleValue& v = at(d.items[i + 1]);
      if (v.kind == Kind::Tensor) {
        if (!names_.insert(full).second) fail(fmt::format("it holds '{}' twice", printable(full)));
        out.emplace_back(full, tensor(v, full));
      } else if (v.kind == Kind::Dict) {
        named_tensors(d.items[i + 1], full + ".", out, depth + 1);
      } else if (v.kind != Kind::None) {  // None: an old format's undefined tensor
        fail(fmt::format("'{}' is neither a tensor nor a module", printable(full)));
      }
    }
  }
  // Before the next part's names (the EMA's are the model's again).
  void new_names() { names_.clear(); }

 private:
  const Unpickled& u_;
  std::string path_;
  uint64_t budget_, used_ = 0;
  std::vector<bool> entered_;
  std::unordered_set<std::string> names_;
};

// Whether TorchScript code defines a method: `def` and any blank after it (the red team's
// `def<TAB>__setstate__` passed a search for "def "), or a state hook named anywhere.
bool defines_methods(std::string_view code) {
  for (size_t at = code.find("def"); at != std::string_view::npos; at = code.find("def", at + 1)) {
    const bool starts = at == 0 || !(std::isalnum(static_cast<unsigned char>(code[at - 1])) || code[at - 1] == '_');
    if (starts && at + 3 < code.size() && std::isspace(static_cast<unsigned char>(code[at + 3]))) return true;
  }
  return code.find("__setstate__") != std::string_view::npos || code.find("__getstate__") != std::string_view::npos;
}

// Old formats: TorchScript archives. gputrain's classes declare attributes only. A class with
// methods is not one of them, and one with __setstate__ or __getstate__ would give its pickled
// state another meaning (TorchScript runs them on load): such files are refused, as is a code
// file too large to be one of gputrain's. Nothing of the code is run here either way.
void check_torchscript_code(const std::string& path, const MappedFile& m, const std::vector<ZipMember>& members) {
  uint64_t inflated = 0;
  for (const auto& z : members) {
    if (z.name.find("/code/") == std::string::npos || !z.name.ends_with(".py")) continue;
    const std::string where = "checkpoint '" + path + "': member '" + printable(z.name) + "'";
    if (z.usize > kMaxCodeMember || (inflated += z.usize) > m.size + kMaxCodeMember)
      throw usage_error(fmt::format("{} claims {} bytes of code: not a gputrain checkpoint", where, z.usize),
                        "gputrain checkpoints define no code; pass one written by gputrain");
    std::string_view code;
    std::shared_ptr<std::vector<uint8_t>> buffer;
    if (z.method == 8) {
      buffer = zip_inflate(where, m, z, zip_member_start(where, m, z, kDamagedCheckpointHint), kDamagedCheckpointHint);
      code = {reinterpret_cast<const char*>(buffer->data()), buffer->size()};
    } else {
      const auto [data, size] = zip_stored_bytes(where, m, z, kDamagedCheckpointHint);
      code = {reinterpret_cast<const char*>(data), size};
    }
    if (defines_methods(code))
      throw usage_error(where + " defines methods (TorchScript code, which a TorchScript loader would run): not a "
                                "gputrain checkpoint",
                        "gputrain checkpoints define no code; pass one written by gputrain");
  }
}

// The format tag: "gputrain-checkpoint-N".
int64_t format_version(const Tree& t, const PickleValue& tag) {
  const std::string prefix = "gputrain-checkpoint-";
  if (tag.kind != Kind::String || tag.text.rfind(prefix, 0) != 0) t.fail("not written by gputrain (no gputrain format tag)");
  const auto version = parse_integer(tag.text.substr(prefix.size()));
  if (!version || *version < 1) t.fail("its format tag is damaged");
  return *version;
}

// No run takes 2^40 optimizer steps (35 years at 1,000 steps a second): a larger count is damage.
constexpr int64_t kMaxSteps = int64_t{1} << 40;

CheckpointMeta read_meta(Tree& t, const PickleValue& root, int version) {
  // Format 3 keeps the position in a "meta" dict; the old ones as "meta.<name>" attributes.
  const PickleValue& m = version >= 3 ? t.dict(root, "meta") : root;
  const std::string p = version >= 3 ? "" : "meta.";
  CheckpointMeta meta;
  meta.epoch = t.integer(t.need(m, p + "epoch", "epoch"), "epoch");
  meta.step = t.integer(t.need(m, p + "step", "step"), "step");
  meta.best_score = t.number(t.need(m, p + (version >= 3 ? "best_score" : "best_accuracy"), "best score"), "best score");
  meta.config_json = t.text(t.need(m, p + "config", "configuration record"), "config");
  if (!std::isfinite(meta.best_score)) t.fail("its best score is not a finite number");
  // The run's configuration record, which a resume, eval and infer rebuild the run from: a JSON
  // object whose parts read as the run reads them (empty only in checkpoints tests write by hand).
  int64_t global = 0;
  if (!meta.config_json.empty()) {
    const auto record = nlohmann::json::parse(meta.config_json, nullptr, false);
    if (!record.is_object()) t.fail("its configuration record is not a JSON object");
    try {
      const StoredConfig stored = read_config_record(record);
      if (!stored.requested.is_object() || !stored.resolved.is_object()) throw std::invalid_argument("halves");
      global = record_global_batch(record);
      (void)record.value("world_size", int64_t{1});
      (void)record.value("branched_from", std::string());
      (void)record.value("amp_fallback", std::string());
    } catch (const std::exception&) {
      t.fail("its configuration record is damaged (a part of it has the wrong type)");
    }
  }
  if (version == 1) {
    const int64_t batches = t.integer(t.need(m, "meta.batch", "position"), "meta.batch");
    if (batches < 0 || global < 0 || (global > 0 && batches > std::numeric_limits<int64_t>::max() / global) ||
        (batches > 0 && global == 0))
      t.fail("its position is out of range");
    meta.samples = batches * global;
  } else {
    meta.samples = t.integer(t.need(m, p + "samples", "position"), "samples");
    if (auto e = t.find(m, p + "evaluated")) meta.evaluated = t.flag(t.at(*e), "evaluated");
  }
  if (meta.epoch < 0 || meta.step < 0 || meta.samples < 0 || meta.step > kMaxSteps || meta.epoch > kMaxSteps)
    t.fail("its position is out of range");
  // Absent in checkpoints written before --early_stopping existed.
  if (auto e = t.find(m, p + "evals_since_best")) meta.evals_since_best = t.integer(t.at(*e), "evals_since_best");
  if (meta.evals_since_best < 0 || meta.evals_since_best > kMaxSteps) t.fail("its early-stopping count is out of range");
  // Absent in checkpoints written before train --until existed.
  if (auto e = t.find(m, p + "last_eval")) {
    const PickleValue& d = t.at(*e);
    if (d.kind != Kind::Dict) t.fail("'last_eval' is not a dict");
    for (size_t i = 0; i + 1 < d.items.size(); i += 2)
      meta.last_eval[t.name(t.at(d.items[i]), "a metric's name")] = t.number(t.at(d.items[i + 1]), "a metric");
  }
  return meta;
}

// An optimizer group's options: numbers, flags and betas, whatever the format (format 3 has
// PyTorch's names; the old ones LibTorch's, which are the same).
void read_group_options(Tree& t, const PickleValue& o, OptimizerState::Group& g) {
  for (size_t i = 0; i + 1 < o.items.size(); i += 2) {
    const std::string& name = t.name(t.at(o.items[i]), "an option's name");
    const PickleValue& v = t.at(o.items[i + 1]);
    if (name == "params") continue;
    if (name == "betas") {
      if (v.kind != Kind::Tuple || v.items.size() != 2) t.fail("the optimizer's 'betas' is not a pair");
      g.betas = {t.number(t.at(v.items[0]), "betas"), t.number(t.at(v.items[1]), "betas")};
    } else if (v.kind == Kind::Bool) {
      g.flags[name] = v.integer != 0;
    } else if (v.kind == Kind::Float || v.kind == Kind::Int) {
      g.numbers[name] = t.number(v, name);
    }  // others (PyTorch's foreach, maximize, ...) are not gputrain's
  }
}

std::map<std::string, torch::Tensor> read_param_state(Tree& t, size_t i, int depth) {
  t.enter(i, depth);
  const PickleValue& s = t.at(i);
  if (s.kind != Kind::Dict) t.fail("a parameter's optimizer state is not a dict");
  std::map<std::string, torch::Tensor> out;
  for (size_t k = 0; k + 1 < s.items.size(); k += 2) {
    const std::string& name = t.name(t.at(s.items[k]), "an optimizer state's name");
    const PickleValue& v = t.at(s.items[k + 1]);
    if (v.kind == Kind::Tensor)
      out[name] = t.tensor(v, name);
    else if (v.kind == Kind::Int)  // old formats: the step as an integer
      out[name] = torch::full({}, static_cast<double>(v.integer), torch::kDouble);
    else if (v.kind != Kind::None)
      t.fail(fmt::format("the optimizer state '{}' is neither a tensor nor a count", printable(name)));
  }
  return out;
}

// Format 3: PyTorch's optimizer.state_dict() layout.
OptimizerState read_optimizer(Tree& t, size_t i) {
  t.enter(i, 1);
  const PickleValue& o = t.at(i);
  OptimizerState out;
  const PickleValue& groups = t.need(o, "param_groups", "optimizer's parameter groups");
  if (groups.kind != Kind::List) t.fail("the optimizer's 'param_groups' is not a list");
  for (size_t gi : groups.items) {
    t.enter(gi, 2);
    const PickleValue& g = t.at(gi);
    if (g.kind != Kind::Dict) t.fail("an optimizer's parameter group is not a dict");
    OptimizerState::Group group;
    read_group_options(t, g, group);
    const auto params = t.find(g, "params");
    if (!params || t.at(*params).kind != Kind::List) t.fail("a parameter group's 'params' is not a list");
    t.enter(*params, 3);
    t.charge(t.at(*params).items.size() * sizeof(int64_t));
    for (size_t p : t.at(*params).items) group.params.push_back(t.integer(t.at(p), "a parameter index"));
    out.groups.push_back(std::move(group));
  }
  if (const auto shards = t.find(o, "gputrain_shards")) out.shards = t.text(t.at(*shards), "the shard index");
  const PickleValue& state = t.dict(o, "state");
  for (size_t k = 0; k + 1 < state.items.size(); k += 2) {
    const int64_t index = t.integer(t.at(state.items[k]), "a parameter index");
    if (out.state.count(index)) t.fail(fmt::format("the optimizer holds two states for parameter {}", index));
    out.state[index] = read_param_state(t, state.items[k + 1], 2);
  }
  return out;
}

// Old formats: LibTorch's Optimizer::save, which keys each parameter's state by the address its
// tensor had in the process that wrote it, and lists those addresses per group in order. Here
// they become positions, as format 3 numbers them.
OptimizerState read_legacy_optimizer(Tree& t, size_t i) {
  auto o = t.index(i, 1);
  auto child = [&](const std::unordered_map<std::string_view, size_t>& d, const std::string& key) {
    auto it = d.find(key);
    if (it == d.end()) t.fail(fmt::format("its optimizer holds no '{}'", key));
    return it->second;
  };
  const auto groups = t.index(child(o, "param_groups"), 2);
  const auto states = t.index(child(o, "state"), 2);
  OptimizerState out;
  std::unordered_map<std::string_view, int64_t> position;  // address -> position
  const int64_t n_groups = t.integer(t.at(child(groups, "param_groups/size")), "param_groups/size");
  if (n_groups < 0 || n_groups > static_cast<int64_t>(groups.size())) t.fail("its optimizer's group count is out of range");
  for (int64_t gi = 0; gi < n_groups; ++gi) {
    const auto g = t.index(child(groups, "param_groups/" + std::to_string(gi)), 3);
    OptimizerState::Group group;
    const size_t options = child(g, "options");
    t.enter(options, 4);
    read_group_options(t, t.at(options), group);
    const int64_t n = t.integer(t.at(child(g, "params/size")), "params/size");
    if (n < 0 || n > static_cast<int64_t>(g.size())) t.fail("its optimizer's parameter count is out of range");
    for (int64_t j = 0; j < n; ++j) {
      const std::string& address = t.name(t.at(child(g, "params/" + std::to_string(j))), "a parameter key");
      const auto index = static_cast<int64_t>(position.size());
      if (!position.emplace(address, index).second) t.fail("its optimizer lists one parameter twice");
      group.params.push_back(index);
    }
    out.groups.push_back(std::move(group));
  }
  for (const auto& [address, state] : states) {
    auto it = position.find(address);
    if (it == position.end()) t.fail("its optimizer holds state for a parameter in no group");
    out.state[it->second] = read_param_state(t, state, 3);
  }
  return out;
}

torch::Tensor optional_tensor(Tree& t, const PickleValue& d, std::string_view key) {
  auto i = t.find(d, key);
  return i ? t.tensor(t.at(*i), key) : torch::Tensor();
}

void write_named(PickleWriter& out, const NamedTensors& tensors) {
  out.begin_dict();
  for (const auto& [name, t] : tensors) {
    out.text(name);
    out.tensor(t.detach());
  }
  out.end();
}

}  // namespace

void write_checkpoint(const CheckpointData& c, const std::function<size_t(const void*, size_t)>& sink) {
  PickleWriter out;
  out.begin_dict();
  out.text("format");
  out.text(fmt::format("gputrain-checkpoint-{}", kCheckpointVersion));
  const CheckpointMeta& meta = c.meta;
  out.text("meta");
  out.begin_dict();
  out.text("epoch"), out.integer(meta.epoch);
  out.text("samples"), out.integer(meta.samples);
  out.text("step"), out.integer(meta.step);
  out.text("evaluated"), out.boolean(meta.evaluated);
  out.text("best_score"), out.number(meta.best_score);
  out.text("evals_since_best"), out.integer(meta.evals_since_best);
  if (!meta.last_eval.empty()) {
    out.text("last_eval");
    out.begin_dict();
    for (const auto& [name, value] : meta.last_eval) out.text(name), out.number(value);
    out.end();
  }
  out.text("config"), out.text(meta.config_json);
  out.end();
  out.text("model");
  write_named(out, c.model);
  if (!c.ema.empty()) {
    out.text("ema");
    write_named(out, c.ema);
  }
  out.text("optimizer");
  write_optimizer_state(out, c.optimizer);
  out.text("scaler");
  out.begin_dict();
  out.text("scale"), out.tensor(c.scale);
  out.text("growth_tracker"), out.tensor(c.growth_tracker);
  out.end();
  out.text("rng");
  out.begin_dict();
  if (c.rng_cpu.defined()) out.text("cpu"), out.tensor(c.rng_cpu);
  if (c.rng_cuda.defined()) out.text("cuda"), out.tensor(c.rng_cuda);
  if (meta.rank_rng.cpu.defined()) out.text("ranks_cpu"), out.tensor(meta.rank_rng.cpu);
  if (meta.rank_rng.cuda.defined()) out.text("ranks_cuda"), out.tensor(meta.rank_rng.cuda);
  out.end();
  if (!c.step_state.empty()) {
    out.text("step_state");
    write_named(out, c.step_state);
  }
  out.end();
  write_torch_save(out, sink);
}

CheckpointData read_checkpoint_file(const std::string& path, CheckpointParts parts) {
  if (!std::filesystem::exists(path))
    throw usage_error("checkpoint '" + path + "' does not exist",
                      "a run keeps its checkpoints in <output_dir>/checkpoints/ (last.pt, best.pt, epoch-N.pt)");
  const MappedFile m = map_file(path);
  const std::string where = "checkpoint '" + path + "'";
  if (m.size < 4 || std::string_view(reinterpret_cast<const char*>(m.data), 4) != "PK\x03\x04")
    throw usage_error(where + " cannot be loaded: not a zip archive", kDamagedCheckpointHint);
  const auto members = zip_directory(where, m, kDamagedCheckpointHint);
  if (detect_weights_format(path, m) != WeightsFormat::GputrainCheckpoint)
    throw usage_error(where + " cannot be loaded: not written by gputrain (no gputrain format tag)",
                      kDamagedCheckpointHint);
  bool torchscript = false;
  for (const auto& z : members)
    if (z.name.find("/code/") != std::string::npos || z.name.ends_with("/constants.pkl")) torchscript = true;
  if (torchscript) check_torchscript_code(path, m, members);
  // For the metadata (which a resume, eval and infer read before they build anything) the whole
  // structure is still read and walked, so that a hostile file is refused before any work; only
  // tensors of more than a few counters' bytes stay unread (on the meta device).
  const Unpickled u = read_pickled_archive(where, m, kDamagedCheckpointHint,
                                           {.torchscript_records = torchscript, .memory_budget = pickle_budget(m)},
                                           parts == CheckpointParts::Meta ? 64 : UINT64_MAX);

  Tree t(u, path, pickle_budget(m));
  const PickleValue& root = t.root();
  if (root.kind != Kind::Dict) t.fail("it holds no dict");
  t.enter(u.root, 0);
  const bool v3 = !torchscript;
  CheckpointData c;
  const int64_t version = format_version(t, t.need(root, v3 ? "format" : "meta.format", "format tag"));
  if (version > kCheckpointVersion)
    throw NewerCheckpoint({fmt::format("checkpoint '{}' has format {}; this gputrain reads versions 1 to {}", path,
                                       version, kCheckpointVersion)},
                          "continue the run with the gputrain that wrote it, or a newer one (gputrain --version)",
                          kExitUsage);
  c.version = static_cast<int>(version);
  if (v3 != (c.version >= 3)) t.fail(fmt::format("format {} in a {} archive", c.version, v3 ? "torch.save" : "TorchScript"));
  c.meta = read_meta(t, root, c.version);

  auto model = t.find(root, "model");
  if (!model) t.fail("it holds no model");
  t.named_tensors(*model, "", c.model, 1);
  if (c.model.empty()) t.fail("its model holds no tensors");
  t.new_names();
  if (auto ema = t.find(root, "ema")) t.named_tensors(*ema, "", c.ema, 1);

  auto optimizer = t.find(root, "optimizer");
  if (!optimizer) t.fail("it holds no optimizer state");
  c.optimizer = v3 ? read_optimizer(t, *optimizer) : read_legacy_optimizer(t, *optimizer);
  if (v3) {
    const PickleValue& scaler = t.dict(root, "scaler");
    c.scale = t.tensor(t.need(scaler, "scale", "loss scale"), "scale");
    c.growth_tracker = t.tensor(t.need(scaler, "growth_tracker", "growth tracker"), "growth_tracker");
    const PickleValue& rng = t.dict(root, "rng");
    c.rng_cpu = optional_tensor(t, rng, "cpu");
    c.rng_cuda = optional_tensor(t, rng, "cuda");
    c.meta.rank_rng = {optional_tensor(t, rng, "ranks_cpu"), optional_tensor(t, rng, "ranks_cuda")};
    t.new_names();
    if (auto step_state = t.find(root, "step_state")) t.named_tensors(*step_state, "", c.step_state, 1);
  } else {
    c.scale = t.tensor(t.need(root, "scaler.scale", "loss scale"), "scaler.scale");
    c.growth_tracker = t.tensor(t.need(root, "scaler.growth_tracker", "growth tracker"), "scaler.growth_tracker");
    c.rng_cpu = optional_tensor(t, root, "rng.cpu");
    c.rng_cuda = optional_tensor(t, root, "rng.cuda");
    c.meta.rank_rng = {optional_tensor(t, root, "rng.ranks.cpu"), optional_tensor(t, root, "rng.ranks.cuda")};
  }
  return c;
}

}  // namespace gputrain
