// `gputrain benchmark --until METRIC=VALUE`: each variant trained by the real fit loop (its
// schedule, an evaluation every epoch or every --eval_every steps) until the test metric reaches
// the value, once per seed; the time to it, not samples per second, is the figure.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/fit_target.h"

namespace gputrain {

// One run to the target, with one seed.
struct TargetRun {
  int64_t seed = 0;
  bool reached = false;
  double seconds = 0;       // training time to the target (evaluation excluded); the whole run's when not reached
  double eval_seconds = 0;  // the evaluations' time
  int64_t steps = 0;        // optimizer steps to the target, or run
  double epochs = 0;        // steps / steps per epoch
  double metric = 0;        // the target metric at the last evaluation (NaN when none ran)
  double samples_per_sec = 0;  // training throughput over the run
  std::string stopped;      // what ended it before the target: "time limit ...", "early stopping", a divergence
};

// A variant's runs, one per seed, and their medians. A run that never reached the target counts
// as infinitely slow, so the median is "not reached" when half the seeds or more miss it.
struct TargetResult {
  std::vector<TargetRun> runs;
  int64_t reached_count = 0;
  bool reached = false;                         // the median run reached it
  double seconds = 0, steps = 0, epochs = 0;    // medians (of the runs that count, see above)
  double worst_seconds = 0;                     // the slowest seed's (infinite when one missed)
  double eval_seconds = 0, metric = 0, samples_per_sec = 0;  // medians over every run
  double speedup = 0;  // the baseline's median time / this one's (0 when either did not reach)
};

// The medians of `runs` (reached_count, reached, seconds ...; speedup is left to the caller).
TargetResult summarize(std::vector<TargetRun> runs);

}  // namespace gputrain
