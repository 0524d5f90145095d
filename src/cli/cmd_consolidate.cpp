// `gputrain consolidate CHECKPOINT OUT`: a sharded checkpoint as one file (train/consolidate.h).
#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "train/consolidate.h"

namespace gputrain {

int cmd_consolidate(const std::vector<std::string>& words) {
  Args args = parse_command_line(words, {}, false);
  if (args.take_switch("help")) {
    fmt::print(
        "usage: gputrain consolidate CHECKPOINT OUT\n\n"
        "Writes CHECKPOINT, saved by a run with --shard optimizer|gradients (its optimizer state\n"
        "spread over shard files, one per rank), as one file OUT with the whole state, as a run\n"
        "without sharding saves it: torch.load reads it, and a resume on any number of ranks takes it.\n"
        "Resumes, eval and export read a sharded checkpoint as it is; this is for keeping or sharing one file.\n");
    return 0;
  }
  reject_leftover_flags(args, {"help"});
  if (args.positionals.size() != 2)
    throw usage_error("consolidate takes a checkpoint and the file to write",
                      "gputrain consolidate runs/<name>/checkpoints/last.pt whole.pt");
  fmt::print("{}\n", consolidate_checkpoint(args.positionals[0], args.positionals[1]));
  return 0;
}

}  // namespace gputrain
