// `gputrain benchmark`: the train workload run as a matrix of optimizations, timed, with a table
// saying what each one bought in speed and memory on this device.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/report.h"
#include "bench/runner.h"
#include "bench/variants.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "config/merge.h"
#include "core/device_cuda.h"
#include "core/error.h"
#include "core/text.h"
#include "data/make_dataset.h"

namespace gputrain {
namespace {

void print_help() {
  std::printf(
      "usage: gputrain benchmark [--preset P] [workload flags] [benchmark flags]\n\n"
      "Runs the train workload (same flags as `gputrain train`) once per variant: a baseline with\n"
      "every optimization off, each optimization alone, and all together. Each variant starts\n"
      "from the same seed and runs the real training step.\n\n"
      "benchmark flags:\n"
      "  --variants a,b,c   subset of: %s\n"
      "  --warmup_steps N   untimed steps per variant [5]\n"
      "  --steps N          timed steps per repeat [30]\n"
      "  --repeats N        timed repeats per variant [1]\n"
      "  --stage S          full (loader + compute), data (loader alone), compute (no loader) [full]\n"
      "  --json FILE, --csv FILE, --markdown FILE   also write the results there\n",
      join(variant_names(), ", ").c_str());
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s + ",") {
    if (ch == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (ch != ' ') {
      cur += ch;
    }
  }
  return out;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw usage_error("cannot write '" + path + "'", "check that the folder exists and is writable");
  out << text;
}

}  // namespace

int cmd_benchmark(const std::vector<std::string>& words) {
  Args args = parse_config_args(words);
  if (args.take_switch("help")) {
    print_help();
    return 0;
  }
  // Benchmark flags come off first; the rest is the workload. (--warmup_steps here is the
  // timing warm-up; the learning rate stays constant while benchmarking.)
  std::vector<std::string> problems;
  BenchSettings s;
  auto take_int = [&](const char* name, int64_t& into, int64_t min) {
    auto v = args.take_value(name);
    if (!v) return;
    try {
      size_t end = 0;
      into = std::stoll(*v, &end);
      if (end != v->size() || into < min) throw std::invalid_argument("range");
    } catch (const std::exception&) {
      problems.push_back("flag --" + std::string(name) + " has value '" + *v +
                         "' (expected an integer >= " + std::to_string(min) + ")");
    }
  };
  take_int("warmup_steps", s.warmup_steps, 0);
  take_int("steps", s.steps, 1);
  take_int("repeats", s.repeats, 1);
  if (auto v = args.take_value("stage")) {
    s.stage = *v;
    if (s.stage != "full" && s.stage != "data" && s.stage != "compute")
      problems.push_back("stage '" + s.stage + "' (expected full, data or compute)");
  }
  std::vector<std::string> selection;
  if (auto v = args.take_value("variants")) selection = split_list(*v);
  for (const auto& name : selection) {
    auto names = variant_names();
    if (std::find(names.begin(), names.end(), name) == names.end())
      problems.push_back("unknown variant '" + name + "'" + did_you_mean(name, names));
  }
  auto json_path = args.take_value("json"), csv_path = args.take_value("csv"), md_path = args.take_value("markdown");
  for (auto* p : {&json_path, &csv_path, &md_path})
    if (*p && (*p)->empty()) problems.push_back("flags --json, --csv and --markdown need a file name");
  if (!args.positionals.empty()) problems.push_back("unexpected argument '" + args.positionals[0] + "'");

  Config workload;
  try {
    workload = resolve_config(args.flags);
  } catch (const Error& e) {
    problems.insert(problems.end(), e.problems.begin(), e.problems.end());
  }
  if (!problems.empty()) throw Error(problems, "gputrain benchmark --help lists its flags", kExitUsage);

  // Device capabilities decide what is skipped.
  RunContext probe = make_run_context(baseline_config(workload));
  DeviceCaps caps;
  caps.cuda = probe.cuda;
  caps.bf16 = !probe.cuda && cpu_has_bf16();
  if (probe.cuda) {
    auto gpu = query_gpus().at(probe.device.index());
    caps.bf16 = gpu.bf16;
    caps.tf32 = gpu.tf32;
    caps.name = gpu.name;
  }
  auto variants = expand_variants(workload, selection, caps);

  std::printf("benchmark: %s on %s\n", workload.model.c_str(), workload.dataset.c_str());
  for (const auto& [what, state] : probe.report)
    if (what == "device" || what == "memory" || what == "compute capability" || what == "CUDA / cuDNN" ||
        what == "intra-op threads")
      std::printf("  %-21s %s\n", what.c_str(), state.c_str());
  DataSplits data = make_datasets(workload);
  std::printf("  %-21s %s\n  %-21s batch %lld x %lld accumulation\n", "data", data.description.c_str(), "workload",
              static_cast<long long>(workload.batch_size), static_cast<long long>(workload.accumulation_steps));
  std::fflush(stdout);

  const bool tty = isatty(STDERR_FILENO);
  BenchReport report{probe, nullptr, s, {}, probe.cuda ? "GPU (caching allocator peak)" : "host (peak RSS)", ""};
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto& v = variants[i];
    std::string label =
        "benchmark: variant " + std::to_string(i + 1) + "/" + std::to_string(variants.size()) + " " + v.name;
    if (!tty) std::fprintf(stderr, "%s\n", label.c_str());
    report.results.push_back(run_variant(v, data, s, [&](int64_t step, int64_t total) {
      if (tty)
        std::fprintf(stderr, "\r\033[K%s: step %lld/%lld", label.c_str(), static_cast<long long>(step),
                     static_cast<long long>(total));
    }));
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  compare_with_baseline(report.results);

  // Bottleneck attribution for the fastest configuration measured: loader alone vs compute alone.
  if (s.stage == "full") {
    const Variant* best = nullptr;
    for (const auto& v : variants)
      if (v.skipped.empty() && (v.name == "all" || !best)) best = &v;
    if (best) {
      BenchSettings ds = s, cs = s;
      ds.stage = "data";
      cs.stage = "compute";
      auto quiet = [](int64_t, int64_t) {};
      double loader = run_variant(*best, data, ds, quiet).samples_per_sec;
      double compute = run_variant(*best, data, cs, quiet).samples_per_sec;
      char buf[256];
      if (loader < compute)
        std::snprintf(buf, sizeof buf,
                      "bottleneck (%s): input-bound: loader %.0f samples/s < compute %.0f samples/s "
                      "(try --num_workers %lld)",
                      best->name.c_str(), loader, compute,
                      static_cast<long long>(std::max<int64_t>(2, 2 * best->config.num_workers)));
      else
        std::snprintf(buf, sizeof buf, "bottleneck (%s): compute-bound: compute %.0f samples/s < loader %.0f samples/s",
                      best->name.c_str(), compute, loader);
      report.verdict = buf;
    }
  }

  nlohmann::json workload_json = to_json(workload);
  report.workload = &workload_json;
  std::printf("\n%s", format_table(report).c_str());
  if (json_path) write_text(*json_path, to_json(report).dump(2) + "\n");
  if (csv_path) write_text(*csv_path, format_csv(report));
  if (md_path) write_text(*md_path, format_markdown(report));
  return 0;
}

}  // namespace gputrain
