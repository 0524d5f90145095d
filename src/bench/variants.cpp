// The benchmark's optimization matrix: a baseline, each optimization alone, and all together.
#include "bench/variants.h"

#include <algorithm>
#include <functional>

#include "core/error.h"
#include "core/text.h"

namespace gputrain {
namespace {

struct Row {
  const char* name;
  const char* description;
  // Turns the optimization on in a config that has it off; returns a skip reason or "".
  std::function<std::string(Config&, const Config& workload, const DeviceCaps&)> apply;
};

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      {"baseline", "fp32, no autotune, NCHW, main-thread loading, pageable blocking copies",
       [](Config&, const Config&, const DeviceCaps&) { return std::string(); }},
      {"amp_fp16", "fp16 autocast + grad scaler",
       [](Config& c, const Config&, const DeviceCaps& d) {
         c.use_amp = true;
         c.amp_dtype = "fp16";
         return d.cuda ? "" : std::string("fp16 autocast n/a on cpu");
       }},
      {"amp_bf16", "bf16 autocast",
       [](Config& c, const Config&, const DeviceCaps& d) {
         c.use_amp = true;
         c.amp_dtype = "bf16";
         return d.cuda && !d.bf16 ? "bf16 n/a on " + d.name + " (needs compute capability 8.0+)" : std::string();
       }},
      {"cudnn_benchmark", "cuDNN autotuning",
       [](Config& c, const Config&, const DeviceCaps& d) {
         c.cudnn_benchmark = true;
         return d.cuda ? "" : std::string("n/a on cpu (no cuDNN)");
       }},
      {"tf32", "TF32 matmuls and convolutions",
       [](Config& c, const Config&, const DeviceCaps& d) {
         c.tf32 = true;
         if (!d.cuda) return std::string("n/a on cpu");
         return d.tf32 ? std::string() : "n/a on " + d.name + " (needs compute capability 8.0+)";
       }},
      {"channels_last", "NHWC memory format",
       [](Config& c, const Config&, const DeviceCaps&) {
         c.channels_last = true;
         return c.model == "mlp" ? std::string("n/a for mlp (flat inputs)") : std::string();
       }},
      {"workers", "loader threads + prefetch",
       [](Config& c, const Config& w, const DeviceCaps&) {
         c.num_workers = std::max<int64_t>(w.num_workers, 2);
         c.prefetch_factor = w.prefetch_factor;
         return std::string();
       }},
      {"pinned_non_blocking", "pinned host memory + non-blocking copies",
       [](Config& c, const Config&, const DeviceCaps& d) {
         c.pin_memory = c.non_blocking = true;
         return d.cuda ? "" : std::string("n/a on cpu (no host-to-device copy)");
       }},
      {"batch_x2", "double batch size",
       [](Config& c, const Config&, const DeviceCaps&) {
         c.batch_size *= 2;
         return std::string();
       }},
      // Not a speed-up: it buys activation memory (the memory column) with a second forward
      // per block, so "all" leaves it out.
      {"grad_checkpointing", "recompute residual blocks / encoder layers in backward",
       [](Config& c, const Config&, const DeviceCaps&) {
         c.grad_checkpointing = true;
         const bool has_blocks = c.model.rfind("resnet", 0) == 0 || c.model == "transformer";
         return has_blocks ? std::string() : "n/a for " + c.model + " (no residual blocks or encoder layers)";
       }},
  };
  return table;
}

}  // namespace

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& r : rows()) names.push_back(r.name);
  names.push_back("all");
  return names;
}

Config baseline_config(const Config& w) {
  Config c = w;
  c.use_amp = false;
  c.cudnn_benchmark = false;
  c.tf32 = false;
  c.channels_last = false;
  c.num_workers = 0;
  c.pin_memory = false;
  c.non_blocking = false;
  c.grad_checkpointing = false;
  return c;
}

bool same_samples_as_baseline(const std::string& variant) { return variant != "batch_x2"; }

std::vector<Variant> expand_variants(const Config& workload, const std::vector<std::string>& selection,
                                     const DeviceCaps& caps) {
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
  // "all": the recipe `train` runs by default on this device, at the workload's batch size
  // (batch_x2 is a different workload). AMP follows --amp_dtype auto: bf16 where the device
  // has native bf16 (GPU or CPU), fp16 on older GPUs, none on other CPUs (emulated bf16 is
  // slower than fp32 there; the amp_bf16 row shows it).
  Variant all{"all", "every supported optimization together", base, ""};
  for (const auto& r : rows()) {
    Variant v{r.name, r.description, base, ""};
    v.skipped = r.apply(v.config, workload, caps);
    if (wanted(r.name)) out.push_back(v);
    std::string n = r.name;
    if (n == "baseline" || n == "batch_x2" || n == "grad_checkpointing" || !v.skipped.empty()) continue;
    if (n == "amp_fp16" && (!caps.cuda || caps.bf16)) continue;
    if (n == "amp_bf16" && !caps.bf16) continue;
    r.apply(all.config, workload, caps);
  }
  if (wanted("all")) out.push_back(all);
  return out;
}

}  // namespace gputrain
