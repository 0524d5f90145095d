// `gputrain benchmark`: the train workload run as a matrix of optimizations, timed, with a
// table of what each bought on this machine, and where the time goes (loader or compute).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace gputrain {

struct BenchSettings {
  int64_t warmup_steps = 5;
  int64_t steps = 30;
  int64_t repeats = 1;
  std::string stage = "full";  // full | data | compute
};

struct BenchRequest {
  Config workload;
  std::vector<std::string> variants;  // empty = all
  BenchSettings settings;
  std::optional<std::string> json_path, csv_path, markdown_path;
};

// Returns the process exit code.
int run_benchmark(const BenchRequest& request);

}  // namespace gputrain
