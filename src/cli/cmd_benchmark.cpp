// `gputrain benchmark`: parses the benchmark's own flags and the workload's, then runs the matrix.
#include <fmt/format.h>

#include "bench/benchmark.h"
#include "bench/variants.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "config/merge.h"
#include "core/device_probe.h"
#include "core/error.h"
#include "core/text.h"

namespace gputrain {
namespace {

void print_help() {
  fmt::print(
      "usage: gputrain benchmark [--preset P] [workload flags] [benchmark flags]\n\n"
      "Runs the train workload (same flags as `gputrain train`) once per variant: a baseline with\n"
      "every optimization off, each optimization alone, and all together. Each variant starts\n"
      "from the same seed and runs the real training step.\n\n"
      "benchmark flags:\n"
      "  --variants a,b,c   subset of: {}\n"
      "  --warmup_steps N   untimed steps per variant [5]\n"
      "  --steps N          timed steps per repeat [30]\n"
      "  --repeats N        timed repeats per variant [1]\n"
      "  --stage S          full (loader + compute), data (loader alone), compute (no loader) [full]\n"
      "  --json FILE, --csv FILE, --markdown FILE   also write the results there\n",
      join(variant_names(), ", "));
}

}  // namespace

int cmd_benchmark(const std::vector<std::string>& words) {
  // --warmup_steps here is the timing warm-up (it shadows the learning-rate warm-up, which the
  // benchmark does not use: its learning rate stays constant).
  Args args = parse_command_line(words,
                                 {{"warmup_steps", true},
                                  {"steps", true},
                                  {"repeats", true},
                                  {"stage", true},
                                  {"variants", true},
                                  {"json", true},
                                  {"csv", true},
                                  {"markdown", true}},
                                 true);
  if (args.take_switch("help")) {
    print_help();
    return 0;
  }
  std::vector<std::string> problems;
  BenchRequest q;
  auto take_int = [&](const char* name, int64_t& into, int64_t min) {
    auto v = args.take_value(name);
    if (!v) return;
    const auto n = parse_integer(*v);
    if (n && *n >= min)
      into = *n;
    else
      problems.push_back(fmt::format("flag --{} has value '{}' (expected an integer >= {})", name, *v, min));
  };
  take_int("warmup_steps", q.settings.warmup_steps, 0);
  take_int("steps", q.settings.steps, 1);
  take_int("repeats", q.settings.repeats, 1);
  if (auto v = args.take_value("stage")) {
    q.settings.stage = *v;
    if (*v != "full" && *v != "data" && *v != "compute")
      problems.push_back("stage '" + *v + "' (expected full, data or compute)");
  }
  if (auto v = args.take_value("variants")) q.variants = split_list(*v, ListItems::kTrimmed);
  const auto names = variant_names();
  for (const auto& name : q.variants)
    if (std::find(names.begin(), names.end(), name) == names.end())
      problems.push_back("unknown variant '" + name + "'" + did_you_mean(name, names));
  q.json_path = args.take_value("json");
  q.csv_path = args.take_value("csv");
  q.markdown_path = args.take_value("markdown");
  for (const auto* p : {&q.json_path, &q.csv_path, &q.markdown_path})
    if (*p && (*p)->empty()) problems.push_back("flags --json, --csv and --markdown need a file name");
  if (!args.positionals.empty()) problems.push_back("unexpected argument '" + args.positionals[0] + "'");
  try {
    q.workload = resolve_config(args.flags, [] { return probe_machine().gpus; });
  } catch (const Error& e) {
    problems.insert(problems.end(), e.problems.begin(), e.problems.end());
  }
  if (!problems.empty()) throw Error(problems, "gputrain benchmark --help lists its flags", kExitUsage);
  return run_benchmark(q);
}

}  // namespace gputrain
