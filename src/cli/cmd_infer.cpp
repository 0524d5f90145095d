// `gputrain infer --checkpoint C --out preds.csv`: batched inference with throughput and latency,
// and `--batch_sizes 1,8,64,256` to sweep batch sizes.
#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "config/config.h"
#include "core/error.h"
#include "app/infer_run.h"

namespace gputrain {
namespace {

std::vector<int64_t> parse_batch_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  for (double v : parse_numbers(text)) {
    if (v < 1 || v > (1 << 20) || v != static_cast<double>(static_cast<int64_t>(v))) return {};
    sizes.push_back(static_cast<int64_t>(v));
  }
  return sizes;
}

}  // namespace

int cmd_infer(const std::vector<std::string>& words) {
  Args args = parse_command_line(words, {{"checkpoint", true}, {"out", true}, {"batch_sizes", true}}, true);
  if (args.take_switch("help")) {
    fmt::print(
        "usage: gputrain infer --checkpoint FILE [--out preds.csv] [--batch_sizes 1,8,64,256] [train flags]\n\n"
        "Runs the model over the test split of its run's dataset (or the data the flags name)\n"
        "with the run's AMP and channels_last settings, under inference mode. --device auto or\n"
        "cuda takes the GPU with the most free memory. Reports samples/s and per-batch latency\n"
        "p50/p99. --out writes one CSV row per sample: index, target, prediction (and the class\n"
        "probability). --batch_sizes sweeps batch sizes and prints a table.\n");
    return 0;
  }
  InferRequest q;
  q.checkpoint = args.take_value("checkpoint").value_or("");
  q.out_path = args.take_value("out");
  auto sweep_text = args.take_value("batch_sizes");
  if (q.checkpoint.empty())
    throw usage_error("infer needs --checkpoint FILE",
                      "e.g. gputrain infer --checkpoint runs/<name>/checkpoints/best.pt");
  if (q.out_path && q.out_path->empty()) throw usage_error("flag --out needs a file name");
  if (!args.positionals.empty()) throw usage_error("unexpected argument '" + args.positionals[0] + "' to infer");
  if (sweep_text) {
    q.batch_sizes = parse_batch_sizes(*sweep_text);
    if (q.batch_sizes.empty())
      throw usage_error("--batch_sizes '" + *sweep_text + "' (expected positive integers like 1,8,64,256)");
  }
  if (auto problems = run_folder_flags_given(args.flags, "infer"); !problems.empty())
    throw Error(problems, "gputrain infer --help lists its flags", kExitUsage);
  q.flags = args.flags;
  return run_infer(q);
}

}  // namespace gputrain
