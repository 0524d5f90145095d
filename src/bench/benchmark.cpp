// `gputrain benchmark`: every variant through its own Session, the table, and the bottleneck.
#include "bench/benchmark.h"

#include <unistd.h>

#include <csignal>
#include <optional>

#include <fmt/format.h>

#include "bench/data_parallel.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench/save_recipe.h"
#include "bench/variants.h"
#include "config/fields.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/output_paths.h"
#include "core/fingerprint.h"
#include "core/signals.h"
#include "core/text.h"
#include "parallel/rank_env.h"
#include "weights/safetensors.h"
#include "train/resolve_recipe.h"
#include "train/session.h"

namespace gputrain {
namespace {

// Loader alone vs compute alone for the fastest configuration measured: which one limits it.
std::string bottleneck(const std::vector<Variant>& variants, std::shared_ptr<const DataSplits> data,
                       const BenchSettings& s) {
  const Variant* best = nullptr;
  for (const auto& v : variants)
    if (v.skipped.empty() && (v.name == "all" || !best)) best = &v;
  if (!best) return "";
  BenchSettings ds = s, cs = s;
  ds.stage = "data";
  cs.stage = "compute";
  auto quiet = [](int64_t, int64_t) {};
  const auto loader_only = run_variant(*best, data, ds, quiet);
  const auto compute_only = run_variant(*best, data, cs, quiet);
  if (loader_only.interrupted || compute_only.interrupted) return "bottleneck: not measured (stopped)";
  const double loader = loader_only.samples_per_sec, compute = compute_only.samples_per_sec;
  if (loader < compute)
    return fmt::format(
        "bottleneck ({}): input-bound: loader {:.0f} samples/s < compute {:.0f} samples/s (try --num_workers {})",
        best->name, loader, compute, std::max<int64_t>(2, 2 * best->resolved.num_workers));
  return fmt::format("bottleneck ({}): compute-bound: compute {:.0f} samples/s < loader {:.0f} samples/s", best->name,
                     compute, loader);
}

// --explain: the variant bottleneck() times (the full recipe where it runs), 5 steps more under
// the profiler: the step's regions and the operators with the most self time.
std::string explain(const std::vector<Variant>& variants, std::shared_ptr<const DataSplits> data, const BenchSettings& s) {
  const Variant* best = nullptr;
  for (const auto& v : variants)
    if (v.skipped.empty() && (v.name == "all" || !best)) best = &v;
  if (!best) return "";
  BenchSettings ps = s;
  ps.repeats = 1;
  ps.profile_steps = 5;
  VariantResult r;
  try {
    r = run_variant(*best, data, ps, [](int64_t, int64_t) {});
  } catch (const std::exception& e) {  // the table is measured already: it is kept
    const std::string what = e.what();
    return "explain: not measured (" + what.substr(0, what.find('\n')) + ")";
  }
  if (r.interrupted || r.profile_us <= 0) return "explain: not measured (stopped, or the profiler did not start)";
  const double step_ms = r.profile_us / 1000 / static_cast<double>(ps.profile_steps);
  std::vector<std::string> regions, top, device;
  for (const char* name : {"gputrain::forward", "gputrain::backward", "gputrain::optimizer", "gputrain::data_wait"})
    for (const auto& op : r.profile)
      if (op.name == name)
        regions.push_back(fmt::format("{} {:.0f}%", op.name.substr(10), 100 * op.total_us / r.profile_us));
  for (const auto& op : r.profile) {
    if (op.region) continue;
    auto& list = op.device ? device : top;
    if (list.size() < 3) list.push_back(fmt::format("{} {:.1f}%", op.name, 100 * op.self_us / r.profile_us));
  }
  std::string out = fmt::format("explain ({}): a {:.2f} ms step (5 profiled): {}; most host self time: {}", best->name,
                                step_ms, join(regions, ", "), join(top, ", "));
  if (!device.empty()) out += "; on the GPU: " + join(device, ", ");
  return out;
}

// --until: the variant that reached the target first (median over seeds), or why none did.
std::string target_verdict(const std::vector<VariantResult>& results, const BenchSettings& s) {
  const VariantResult* best = fastest(results);
  const std::string seeds = s.seeds > 1 ? fmt::format("median of {} seeds", s.seeds) : "1 seed";
  if (!best) return fmt::format("no variant reached {} ({})", s.until->text(), seeds);
  return fmt::format("fastest to {}: {}, {:.1f} s of training ({}; evaluation excluded)", s.until->text(), best->name,
                     best->target->seconds, seeds);
}

}  // namespace

int run_benchmark(const BenchRequest& q) {
  install_stop_handlers();  // Ctrl-C or SIGTERM: the variants measured so far are kept
  // Unwritable output files are found now, not after every variant has run.
  refuse_outputs_over_inputs({{"--json", q.json_path.value_or("")},
                              {"--csv", q.csv_path.value_or("")},
                              {"--markdown", q.markdown_path.value_or("")}},
                             input_files(q.workload));
  for (const auto* p : {&q.json_path, &q.csv_path, &q.markdown_path})
    if (*p) check_writable(**p, "benchmark output");
  const BenchSettings& s = q.settings;
  Config workload = q.workload;
  // Where the winner goes, refused now if it cannot be a preset name.
  const std::string recipe_file = q.save_recipe ? recipe_path(*q.save_recipe, workload.device_preset) : "";
  const MachineInfo machine = probe_machine(workload.device != "cpu");
  // Several ranks (gputrain launch, torchrun, srun): every rank measures the data-parallel job
  // with rank 0, then rank 0 alone measures the variants and writes the outputs.
  const RankEnv ranks = read_rank_env();
  std::shared_ptr<Comm> comm;
  if (ranks.world_size > 1) comm = std::make_shared<Comm>(ranks, workload.dist_timeout);
  const bool root = ranks.rank == 0;
  {
    // One device for every variant: the GPU with the most free memory could change between them.
    ResolvedConfig rc(workload);
    resolve_recipe(rc, machine);
    workload.device = rc.resolved.device;
    if (comm && workload.device.rfind("cuda", 0) == 0)
      workload.device = fmt::format("cuda:{}", ranks.local_rank % static_cast<int>(machine.gpus.size()));
  }
  auto variants = expand_variants(workload, q.variants, machine);
  // What a saved recipe is for: taken as `train` takes it (the GPUs a run on this device uses).
  const nlohmann::json fingerprint = machine_fingerprint(workload.device == "cpu" ? std::vector<GpuInfo>{} : machine.gpus);

  // The baseline's Session loads the data once for every variant; its report heads the table.
  // Its model goes before the variants run: their peak memory must be their own.
  std::shared_ptr<const DataSplits> data;
  Recipe recipe;
  {
    Session first(variants.front().config, {.search_batch_size = false});
    data = first.shared_data();
    recipe = first.recipe();
  }
  if (s.until) check_target_applies(*s.until, data->train->is_regression(), data->train->num_classes());
  const bool tty = isatty(STDERR_FILENO);
  if (root) {
    fmt::print("benchmark: {} on {}\n", q.workload.model, q.workload.dataset);
    for (const auto& [what, state] : recipe.report)
      if (what == "device" || what == "memory" || what == "compute capability" || what == "CUDA / cuDNN" ||
          what == "intra-op threads" || what == "device preset")
        fmt::print("  {:<21} {}\n", what, state);
    fmt::print("  {:<21} {}\n  {:<21} batch {} x {} accumulation\n", "data", data->description, "workload",
               q.workload.batch_size, q.workload.accumulation_steps);
    std::fflush(stdout);
  }

  std::optional<DataParallelResult> data_parallel;
  if (comm && s.until)
    throw usage_error("benchmark --until runs on one process", "run it without gputrain launch, torchrun or srun");
  if (comm) {
    // The full recipe where it runs (as bottleneck() picks), else the first variant that runs.
    const Variant* pick = nullptr;
    for (const auto& v : variants)
      if (v.skipped.empty() && (v.name == "all" || !pick)) pick = &v;
    if (!pick) throw usage_error("benchmark: no variant runs on this machine", "see gputrain info");
    const std::string label = fmt::format("benchmark: data parallel over {} ranks ({})", ranks.world_size, pick->name);
    if (root && !tty) fmt::print(stderr, "{}\n", label);
    data_parallel = measure_data_parallel(*pick, data, s, comm, [&](int64_t step, int64_t total) {
      if (root && tty) fmt::print(stderr, "\r\033[K{}: step {}/{}", label, step, total);
    });
    if (!root || stop_signal()) return stop_signal() ? exit_code_for_signal(stop_signal()) : 0;
  }

  nlohmann::json workload_json = to_json(q.workload);
  BenchReport report{recipe, &workload_json, s, {}, recipe.cuda ? "GPU (caching allocator peak)" : "host (peak RSS)", ""};
  report.data_parallel = data_parallel;
  // Rewritten after every variant, so a kill or a crash keeps what was measured. A stream
  // (/dev/stdout, a pipe) cannot be rewritten: it gets the last report alone.
  auto write_outputs = [&](bool last) {
    auto write = [&](const std::optional<std::string>& path, const auto& text) {
      if (path && (last || (own_descriptor(*path) < 0 && !is_special_file(*path))))
        write_file_atomically(*path, text());
    };
    write(q.json_path, [&] { return to_json(report).dump(2) + "\n"; });
    write(q.csv_path, [&] { return format_csv(report); });
    write(q.markdown_path, [&] { return format_markdown(report); });
  };
  for (size_t i = 0; i < variants.size() && !stop_signal(); ++i) {
    const auto& v = variants[i];
    const std::string label = fmt::format("benchmark: variant {}/{} {}", i + 1, variants.size(), v.name);
    if (!tty) fmt::print(stderr, "{}\n", label);
    auto result = s.until ? run_to_target(v, data, *s.until, s.seeds,
                                          [&](int64_t run, int64_t runs) {
                                            if (runs == 1) return;
                                            if (tty)
                                              fmt::print(stderr, "\r\033[K{}: seed {}/{}", label, run, runs);
                                            else
                                              fmt::print(stderr, "{}: seed {}/{}\n", label, run, runs);
                                          })
                          : run_variant(v, data, s, [&](int64_t step, int64_t total) {
                              if (tty) fmt::print(stderr, "\r\033[K{}: step {}/{}", label, step, total);
                            });
    if (result.interrupted) break;
    report.results.push_back(std::move(result));
    if (!report.results.back().session.empty())
      fmt::print("  session ({}): {}\n", v.name, report.results.back().session);
    compare_with_baseline(report.results);
    report.verdict = fmt::format("partial: {} of {} variants measured so far", i + 1, variants.size());
    write_outputs(false);
  }
  if (tty) fmt::print(stderr, "\r\033[K");
  if (const int sig = stop_signal()) {
    report.verdict = fmt::format("partial: {} of {} variants measured (stopped by {})", report.results.size(),
                                 variants.size(), sig == SIGTERM ? "SIGTERM" : "SIGINT");
  } else if (s.until) {
    report.verdict = target_verdict(report.results, s);
  } else {
    report.verdict = s.stage == "full" ? bottleneck(variants, data, s) : "";
    if (s.explain && !stop_signal()) report.explain = explain(variants, data, s);
  }
  fmt::print("\n{}", format_table(report));
  write_outputs(true);
  if (q.save_recipe && stop_signal()) {
    fmt::print("--save_recipe: nothing saved (stopped before every variant was measured)\n");
  } else if (q.save_recipe) {
    const std::string saved = save_recipe(report, recipe_file, fingerprint, workload.device_preset);
    if (saved.empty()) {
      fmt::print("--save_recipe: nothing saved: {}\n", s.until ? "no variant reached " + s.until->text()
                                                                : "every variant's loss drifted");
      return 1;
    }
    fmt::print("{}\n", saved);
  }
  return stop_signal() ? exit_code_for_signal(stop_signal()) : 0;
}

}  // namespace gputrain
