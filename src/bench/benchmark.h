// `gputrain benchmark`: the train workload run as a matrix of optimizations, timed, with a
// table of what each bought on this machine, and where the time goes (loader or compute).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "train/fit_target.h"

namespace gputrain {

struct BenchSettings {
  int64_t warmup_steps = 5;
  int64_t steps = 30;
  int64_t repeats = 1;
  std::string stage = "full";  // full | data | compute
  // --until: each variant trained to this target by the real fit loop, once per seed, instead
  // of timed steps at a constant learning rate.
  std::optional<FitTarget> until;
  int64_t seeds = 1;
};

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
