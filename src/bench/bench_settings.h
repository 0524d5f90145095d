// How each benchmark variant is timed (--warmup_steps, --steps, --repeats, --stage, --until).
// Its own header because the runner that times a variant (bench/runner) needs it, and the
// benchmark command that takes it from the flags (bench/benchmark) calls the runner: in
// bench/benchmark.h it made the runner, the report and the benchmark include one another.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/fit_target.h"

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
  // --explain: the fastest variant's timed steps run once more under the profiler (its breakdown
  // and top operators, bench/benchmark.cpp); set by the benchmark for that run only.
  bool explain = false;
  int64_t profile_steps = 0;  // > 0: the run_variant that records them
};

}  // namespace gputrain
