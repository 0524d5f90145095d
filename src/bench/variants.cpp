// The benchmark's optimization matrix: a baseline, each optimization alone, and all together.
#include "bench/variants.h"

#include <algorithm>
#include <functional>

#include "core/error.h"
#include "core/text.h"
#include "models/family.h"
#include "train/resolve_recipe.h"

namespace gputrain {
namespace {

struct Row {
  const char* name;
  const char* description;
  // Turns the optimization on in a config that has it off.
  std::function<void(Config&, const Config& workload)> apply;
  // Whether the resolved recipe really has it on, and the device report row that says why not.
  std::function<bool(const Recipe&)> on;
  const char* report_row;
};

bool always(const Recipe&) { return true; }

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      {"baseline", "fp32, no autotune, NCHW, unfused optimizer, main-thread loading, pageable blocking copies",
       [](Config&, const Config&) {}, always, ""},
      {"amp_fp16", "fp16 autocast + grad scaler",
       [](Config& c, const Config&) {
         c.use_amp = true;
         c.amp_dtype = "fp16";
       },
       [](const Recipe& r) { return r.precision.amp && r.precision.dtype == c10::kHalf; }, "AMP"},
      {"amp_bf16", "bf16 autocast",
       [](Config& c, const Config&) {
         c.use_amp = true;
         c.amp_dtype = "bf16";
       },
       [](const Recipe& r) { return r.precision.amp && r.precision.dtype == c10::kBFloat16; }, "AMP"},
      {"cudnn_benchmark", "cuDNN autotuning", [](Config& c, const Config&) { c.cudnn_benchmark = true; },
       [](const Recipe& r) { return r.cudnn_benchmark; }, "cuDNN benchmark"},
      {"tf32", "TF32 matmuls and convolutions", [](Config& c, const Config&) { c.tf32 = true; },
       [](const Recipe& r) { return r.tf32; }, "TF32"},
      {"channels_last", "NHWC memory format", [](Config& c, const Config&) { c.channels_last = true; },
       [](const Recipe& r) { return r.channels_last; }, "channels_last"},
      {"fused_optimizer", "optimizer update in one fused kernel", [](Config& c, const Config&) { c.fused_optimizer = "on"; },
       [](const Recipe& r) { return r.fused_optimizer; }, "fused optimizer"},
      {"cuda_graphs", "the whole step captured as one CUDA graph, replayed",
       [](Config& c, const Config&) {
         c.fused_optimizer = "on";  // what makes the update capturable
         c.cuda_graphs = true;
       },
       [](const Recipe& r) { return r.cuda_graphs; }, "CUDA graphs"},
      {"workers", "loader threads + prefetch",
       [](Config& c, const Config& w) {
         c.num_workers = w.num_workers == kAuto ? kAuto : std::max<int64_t>(w.num_workers, 2);
         c.prefetch_factor = w.prefetch_factor;
       },
       always, ""},
      {"pinned_non_blocking", "pinned host memory + non-blocking copies",
       [](Config& c, const Config&) { c.pin_memory = c.non_blocking = true; },
       [](const Recipe& r) { return r.pin_memory; }, "pinned memory"},
      {"fused_head_loss", "a language model's head computed with its loss, in chunks of tokens",
       [](Config& c, const Config&) { c.fused_head_loss = true; },
       [](const Recipe& r) { return r.fused_head_loss; }, "fused head loss"},
      {"batch_x2", "double batch size", [](Config& c, const Config&) { c.batch_size *= 2; }, always, ""},
      // Not a speed-up: it buys activation memory (the memory column) with a second forward
      // per block, so "all" leaves it out.
      {"grad_checkpointing", "recompute residual blocks / encoder layers in backward",
       [](Config& c, const Config&) { c.grad_checkpointing = true; }, always, ""},
  };
  return table;
}

std::string report_state(const Recipe& r, const std::string& row) {
  for (const auto& [what, state] : r.report)
    if (what == row) return state.rfind("off: ", 0) == 0 ? state.substr(5) : state;
  return "off";
}

// Resolves `v.config` for the machine and says why the variant cannot run, if it cannot.
void resolve(Variant& v, const Row* row, const MachineInfo& machine) {
  ResolvedConfig rc(v.config);
  Recipe recipe = resolve_recipe(rc, machine);
  v.resolved = rc.resolved;
  if (row && !row->on(recipe)) v.skipped = report_state(recipe, row->report_row);
  if (v.name == "grad_checkpointing" && !family(v.config.model).blocks)
    v.skipped = "n/a for " + v.config.model + " (no residual blocks or encoder layers)";
}

}  // namespace

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& r : rows()) names.push_back(r.name);
  names.push_back("all");
  names.push_back("all_cuda_graphs");
  return names;
}

Config baseline_config(const Config& w) {
  Config c = w;
  c.use_amp = false;
  c.cudnn_benchmark = false;
  c.tf32 = false;
  c.channels_last = false;
  c.fused_optimizer = "off";
  c.cuda_graphs = false;
  c.num_workers = 0;
  c.pin_memory = false;
  c.non_blocking = false;
  c.grad_checkpointing = false;
  c.fused_head_loss = false;
  return c;
}

bool same_samples_as_baseline(const std::string& variant) { return variant != "batch_x2"; }

std::vector<Variant> expand_variants(const Config& workload, const std::vector<std::string>& selection,
                                     const MachineInfo& machine) {
  auto names = variant_names();
  std::vector<std::string> problems;
  for (const auto& s : selection)
    if (std::find(names.begin(), names.end(), s) == names.end())
      problems.push_back("unknown variant '" + s + "'" + did_you_mean(s, names));
  if (!problems.empty()) throw Error(problems, "variants: " + join(names, ", "), kExitUsage);
  auto wanted = [&](const std::string& n) {
    return n == "baseline" || selection.empty() || std::find(selection.begin(), selection.end(), n) != selection.end();
  };

  const Config base = baseline_config(workload);
  std::vector<Variant> out;
  for (const auto& r : rows()) {
    if (!wanted(r.name)) continue;
    Variant v{r.name, r.description, base, base, ""};
    r.apply(v.config, workload);
    resolve(v, &r, machine);
    out.push_back(v);
  }
  // "all": the recipe `train` runs by default, at the workload's batch size (batch_x2 is a
  // different workload); the resolver turns off what this machine lacks, as in `train`.
  Variant all{"all", "every supported optimization together", base, base, ""};
  for (const auto& r : rows()) {
    const std::string n = r.name;
    // CUDA graphs stay out of `train`'s defaults until GPU runs have proven them in every
    // recipe; "all_cuda_graphs" measures what adding them buys.
    if (n != "batch_x2" && n != "grad_checkpointing" && n != "amp_fp16" && n != "amp_bf16" && n != "cuda_graphs")
      r.apply(all.config, workload);
  }
  all.config.use_amp = workload.use_amp;
  all.config.amp_dtype = workload.amp_dtype;  // auto: bf16 where native, fp16 on older GPUs, off on other CPUs
  if (wanted("all")) {
    resolve(all, nullptr, machine);
    out.push_back(all);
  }
  // Two H200 runs measured CUDA graphs alone at 1.4x on ResNet-50 and 7x on the small MLP,
  // while "all" (without them) was 1.2x on that MLP.
  if (wanted("all_cuda_graphs")) {
    const Row& graphs_row = *std::find_if(rows().begin(), rows().end(), [](const Row& r) { return std::string(r.name) == "cuda_graphs"; });
    Variant graphs{"all_cuda_graphs", "every supported optimization, the step captured as a CUDA graph too", all.config, base, ""};
    graphs_row.apply(graphs.config, workload);
    resolve(graphs, &graphs_row, machine);
    out.push_back(graphs);
  }
  return out;
}

}  // namespace gputrain
