// `gputrain eval`: a checkpoint's metrics on a dataset.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "config/flag_arg.h"

namespace gputrain {

struct EvalRequest {
  std::string checkpoint;
  std::optional<std::string> json_path;  // also write the metrics there
  std::vector<FlagArg> flags;            // data and speed flags over the checkpoint's configuration
};

// Returns the process exit code.
int run_eval(const EvalRequest& request);

}  // namespace gputrain
