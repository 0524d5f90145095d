// `gputrain infer`: batched predictions with throughput and latency, and a batch-size sweep.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/flag_arg.h"

namespace gputrain {

struct InferRequest {
  std::string checkpoint;
  std::optional<std::string> out_path;  // one CSV row per sample
  std::vector<int64_t> batch_sizes;     // empty: the run's eval_batch_size
  std::vector<FlagArg> flags;           // data and speed flags over the checkpoint's configuration
};

// Returns the process exit code.
int run_infer(const InferRequest& request);

}  // namespace gputrain
