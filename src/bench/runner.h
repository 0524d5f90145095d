// Runs one benchmark variant: a fresh model, the real Trainer::step, timed after warm-up.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "bench/variants.h"
#include "data/make_dataset.h"

namespace gputrain {

struct BenchSettings {
  int64_t warmup_steps = 5;
  int64_t steps = 30;
  int64_t repeats = 1;
  std::string stage = "full";  // full | data | compute
};

struct VariantResult {
  std::string name, description, skipped;
  Config config;                // the variant's configuration
  std::vector<double> step_ms;  // every timed step, all repeats
  double median_ms = 0, p90_ms = 0, samples_per_sec = 0;
  double speedup = 0;             // samples/s relative to the baseline
  int64_t peak_memory_bytes = 0;  // CUDA caching allocator peak, or peak RSS on CPU
  double memory_saving = 0;       // 1 - peak / baseline peak
  double data_wait_fraction = 0;  // share of the timed wall time spent waiting for batches
  double loss = 0;                // mean loss of the last repeat's steps (NaN for --stage data)
  bool loss_drift = false;        // loss differs from the baseline's beyond tolerance
};

// Called with (step, total steps) while a variant runs, for the progress line.
using StepCallback = std::function<void(int64_t, int64_t)>;

VariantResult run_variant(const Variant& v, const DataSplits& data, const BenchSettings& s,
                          const StepCallback& on_step);

// Fills speedup, memory_saving and loss_drift from the baseline row (the first one).
void compare_with_baseline(std::vector<VariantResult>& results);

}  // namespace gputrain
