// `gputrain benchmark`: parses the benchmark's own flags and the workload's, then runs the matrix.
#include <fmt/format.h>

#include "bench/benchmark.h"
#include "bench/variants.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "config/merge.h"
#include "core/device_probe.h"
#include "core/error.h"
#include "config/fit_target.h"
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
      "  --explain          profile 5 more steps of the full recipe: the step's forward, backward,\n"
      "                     optimizer and data-wait shares, and the operators with the most self time\n"
      "  --json FILE, --csv FILE, --markdown FILE   also write the results there\n\n"
      "time to a target (instead of timed steps):\n"
      "  --until M=V        train each variant with the real loop (its learning-rate schedule, an\n"
      "                     evaluation every epoch) until the test metric M reaches V, e.g.\n"
      "                     test_accuracy=0.92 or test_loss=0.3; capped by --epochs and --time_limit.\n"
      "                     The figure is the training time to it, evaluations excluded\n"
      "  --seeds N          runs per variant from --seed, --seed + 1, ...: the median and the worst [1]\n"
      "  --eval_every N     also evaluate every N steps inside an epoch [0: at epoch ends]\n\n"
      "the winner as this machine's recipe:\n"
      "  --save_recipe [NAME]  write the fastest variant (to the target with --until, else in\n"
      "                     samples/s among those whose loss did not drift) as a device preset in\n"
      "                     $XDG_CONFIG_HOME/gputrain/presets (~/.config/gputrain/presets) [NAME:\n"
      "                     <built-in recipe>-measured]; --device_preset auto prefers it on this\n"
      "                     machine (same GPUs, driver, CPU and cores). The benchmark itself always\n"
      "                     starts from the built-in recipe: its 'all' is that recipe.\n",
      join(variant_names(), ", "));
}

}  // namespace

int cmd_benchmark(const std::vector<std::string>& words) {
  // --warmup_steps here is the timing warm-up (it shadows the learning-rate warm-up, which timed
  // steps do not use: their learning rate stays constant); a --until run trains as `train` does,
  // so there it is the learning-rate warm-up again.
  Args args = parse_command_line(words,
                                 {{"warmup_steps", true},
                                  {"steps", true},
                                  {"repeats", true},
                                  {"stage", true},
                                  {"variants", true},
                                  {"json", true},
                                  {"csv", true},
                                  {"markdown", true},
                                  {"until", true},
                                  {"seeds", true},
                                  {"eval_every", true},
                                  {"save_recipe", true},
                                  {"explain", false}},
                                 true);
  if (args.take_switch("help")) {
    print_help();
    return 0;
  }
  std::vector<std::string> problems;
  BenchRequest q;
  std::vector<std::string> given;  // the benchmark's own flags on the line
  auto take_int = [&](const char* name, int64_t& into, int64_t min) {
    auto v = args.take_value(name);
    if (!v) return;
    given.push_back(name);
    const auto n = parse_integer(*v);
    if (n && *n >= min)
      into = *n;
    else
      problems.push_back(fmt::format("flag --{} has value '{}' (expected an integer >= {})", name, *v, min));
  };
  // Left in the flags with --until: resolve_config reads it as the learning-rate warm-up.
  if (!has_flag(args.flags, "until")) take_int("warmup_steps", q.settings.warmup_steps, 0);
  take_int("steps", q.settings.steps, 1);
  take_int("repeats", q.settings.repeats, 1);
  if (auto v = args.take_value("stage")) {
    given.push_back("stage");
    q.settings.stage = *v;
    if (*v != "full" && *v != "data" && *v != "compute")
      problems.push_back("stage '" + *v + "' (expected full, data or compute)");
  }
  int64_t eval_every = 0;
  take_int("seeds", q.settings.seeds, 1);
  take_int("eval_every", eval_every, 1);
  if (auto v = args.take_value("until")) {
    try {
      q.settings.until = parse_target(*v);
      q.settings.until->eval_every = eval_every;
    } catch (const Error& e) {
      problems.insert(problems.end(), e.problems.begin(), e.problems.end());
    }
    // A --until run trains by epochs: the timed-steps flags would be parsed and ignored.
    for (const auto& name : given)
      if (name != "seeds" && name != "eval_every")
        problems.push_back("flag --" + name + " times steps; a --until run trains by --epochs (drop one of them)");
  } else {
    for (const auto& name : given)
      if (name == "seeds" || name == "eval_every") problems.push_back("flag --" + name + " applies to a --until run");
  }
  for (auto& problem : run_folder_flags_given(args.flags, "benchmark"))
    if (!(has_flag(args.flags, "until") && problem.find("--time_limit ") != std::string::npos))  // caps a --until run
      problems.push_back(problem +
                         (problem.find("--profile") != std::string::npos ? " (--explain profiles the full recipe)" : ""));
  q.settings.explain = args.take_switch("explain");
  if (q.settings.explain && q.settings.until)
    problems.push_back("--explain profiles timed steps; a --until run trains by --epochs (drop one of them)");
  q.save_recipe = args.take_value("save_recipe");
  if (q.save_recipe && q.settings.stage != "full")
    problems.push_back("--save_recipe ranks whole steps: drop --stage " + q.settings.stage);
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
