// `gputrain eval --checkpoint C [data flags]`: the task's metrics of a trained model on a dataset.
#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "app/eval_run.h"

namespace gputrain {

int cmd_eval(const std::vector<std::string>& words) {
  Args args = parse_command_line(words, {{"checkpoint", true}, {"json", true}}, true);
  if (args.take_switch("help")) {
    fmt::print(
        "usage: gputrain eval --checkpoint FILE [--json FILE] [train flags]\n\n"
        "Evaluates a checkpoint on the test split of its run's dataset (the held-out\n"
        "validation part when the run had one), or on the data the flags name, e.g.\n"
        "--test_file other.csv. Prints the loss and the task's metrics.\n");
    return 0;
  }
  EvalRequest q;
  q.checkpoint = args.take_value("checkpoint").value_or("");
  q.json_path = args.take_value("json");
  if (q.checkpoint.empty())
    throw usage_error("eval needs --checkpoint FILE",
                      "e.g. gputrain eval --checkpoint runs/<name>/checkpoints/best.pt");
  if (q.json_path && q.json_path->empty()) throw usage_error("flag --json needs a file name");
  if (!args.positionals.empty()) throw usage_error("unexpected argument '" + args.positionals[0] + "' to eval");
  if (auto problems = run_folder_flags_given(args.flags, "eval"); !problems.empty())
    throw Error(problems, "gputrain eval --help lists its flags", kExitUsage);
  q.flags = args.flags;
  return run_eval(q);
}

}  // namespace gputrain
