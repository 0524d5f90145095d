// `gputrain benchmark`: the train workload run as a matrix of optimizations, timed, with a
// table of what each bought on this machine, and where the time goes (loader or compute).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_settings.h"
#include "config/config.h"

namespace gputrain {

struct BenchRequest {
  Config workload;
  std::vector<std::string> variants;  // empty = all
  BenchSettings settings;
  std::optional<std::string> json_path, csv_path, markdown_path;
  std::optional<std::string> save_recipe;  // --save_recipe [NAME]: "" for the default name
};

// Returns the process exit code.
int run_benchmark(const BenchRequest& request);

}  // namespace gputrain
