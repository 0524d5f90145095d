// Runs one benchmark variant: a Session with the variant's switches, the same Trainer::step
// that `train` runs, timed after warm-up.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_settings.h"
#include "bench/time_to_target.h"
#include "bench/variants.h"
#include "monitor/profiler.h"

namespace gputrain {

class Comm;
struct DataSplits;  // the Session's data (data/make_dataset.h): the benchmark reads it through the Session

// --pipeline_stages: the stages over a variant's timed steps.
struct PipelineResult {
  int64_t stages = 0, micro_batches = 0;
  std::string schedule;
  double bubble = 0, theoretical = 0;  // idle fraction measured, and (N - 1) / (M + N - 1)
  std::vector<double> busy;            // per stage: its share of the pipeline's wall time
};

struct VariantResult {
  std::string name, description, skipped;
  Config config;                // the variant's configuration, as resolved
  std::string session;          // the Session's description (Session::describe_line)
  std::vector<double> step_ms;  // every timed step, all repeats
  double median_ms = 0, p90_ms = 0, samples_per_sec = 0;
  double speedup = 0;             // samples/s relative to the baseline
  // The model's training FLOPs per second over the device's peak at the variant's precision
  // (train/utilization.h); 0 when either is unknown, or for a pipeline stage (a part of the model).
  double mfu = 0;
  int64_t peak_memory_bytes = 0;  // CUDA caching allocator peak, or peak RSS on CPU
  double memory_saving = 0;       // 1 - peak / baseline peak
  double data_wait_fraction = 0;  // share of the timed wall time spent waiting for batches
  double loss = 0;                // mean loss of the last repeat's steps (NaN for --stage data)
  bool loss_drift = false;        // loss differs from the baseline's beyond tolerance
  bool interrupted = false;       // a SIGINT/SIGTERM stopped it: no figures
  double comm_ms = 0;             // data parallel: per step, the wait for the gradients' all-reduce
  // This rank's training state after the timed steps: the optimizer's state tensors (measured)
  // and the gradients at their peak (train/state_memory.h).
  int64_t optimizer_state_bytes = 0, gradient_bytes = 0;
  std::optional<PipelineResult> pipeline;
  std::optional<TargetResult> target;  // --until: the runs to the target, one per seed
  // BenchSettings::profile_steps: the profiled steps' operators and regions by self time, and
  // those steps' wall time.
  std::vector<ProfiledOp> profile;
  double profile_us = 0;
};

// Called with (step, total steps) while a variant runs, for the progress line.
using StepCallback = std::function<void(int64_t, int64_t)>;

// `data` is shared by every variant (they differ in speed switches only). A stop signal ends it
// at the next step, `interrupted`. With `comm`, this rank's part of a data-parallel job.
VariantResult run_variant(const Variant& v, std::shared_ptr<const DataSplits> data, const BenchSettings& s,
                          const StepCallback& on_step, std::shared_ptr<Comm> comm = nullptr);

// --until: `seeds` runs of the real fit loop (schedule, evaluations) from the variant's seed, the
// seed + 1, ..., each until `target` is reached or the run ends. A stop signal ends it,
// `interrupted`; `on_run` is called before each run with (run, seeds).
VariantResult run_to_target(const Variant& v, std::shared_ptr<const DataSplits> data, const FitTarget& target,
                            int64_t seeds, const StepCallback& on_run);

// The winner among the variants that ran: by median time to the target when they raced to one
// (among those that reached it), else by samples/s among those whose loss did not drift.
// Null when none qualifies.
const VariantResult* fastest(const std::vector<VariantResult>& results);

// Fills speedup, memory_saving and loss_drift from the baseline row (the first one); with
// targets, the speedup in time to the target too.
void compare_with_baseline(std::vector<VariantResult>& results);

}  // namespace gputrain
