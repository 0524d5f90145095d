// An output never lands on what the command reads, on another output, or on a run's own files:
// a typo or a tab completion that gives one path twice would destroy a checkpoint, a config or
// a result, and the command would still say it succeeded.
#pragma once
#include <string>
#include <vector>

#include "config/config.h"

namespace gputrain {

struct PathFlag {
  std::string flag;  // as the user wrote it: "--out", "--checkpoint"
  std::string path;
};

// The files `c` names for reading, with their flags: --preset (a file), --config, the data
// files, --init_from, --resume (a file), --model (a file) and --tokenizer. `data_only`: the data
// files and the tokenizer alone, which eval and infer read again from a run's record (its
// --config or --init_from they do not).
std::vector<PathFlag> input_files(const Config& c, bool data_only = false);

// Refuses (exit 2, one line naming both flags) an output that is the same file as an input or
// as another output: the same file on disk (links and hard links included) or, for one not
// there yet, the same place a write lands. Devices and pipes are passed over (two outputs may
// both be /dev/null). Call before the command writes anything.
void refuse_outputs_over_inputs(const std::vector<PathFlag>& outputs, const std::vector<PathFlag>& inputs);

// Refuses an output that is one of the run folder `run_dir`'s own files (config.json,
// checkpoints/, the lock, ...); a file of the user's own in that folder is fine.
void refuse_output_in_run(const PathFlag& output, const std::string& run_dir);

// Whether `dir` holds a run (its metrics.jsonl, checkpoints/ or run record): a checkpoint's
// folder may be any folder, whose config.json is then the user's own.
bool holds_run(const std::string& dir);
// Whether `path` is a run's config.json (its "requested" and "resolved" configurations), not a
// file of the user's own by that name.
bool is_run_record(const std::string& path);

}  // namespace gputrain
