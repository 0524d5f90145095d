// The fit loop: epochs of Trainer steps, an evaluation after each, the checkpoint policy (last,
// best, epoch-N, kept K), early stopping, and the stops: signals, the time limit and a loss that
// stays non-finite. Its parts: step_batches.h, step_log.h, stop_policy.h, fit_evaluations.h.
#pragma once
#include <chrono>
#include <limits>
#include <optional>
#include <string>

#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "config/fit_target.h"
#include "train/run_folder.h"
#include "train/session.h"
#include "train/stop_reason.h"

namespace gputrain {

// How a fit ends besides its epochs: at a target (benchmark --until).
struct FitOptions {
  std::optional<FitTarget> target;
};

struct FitResult {
  StopReason stop;  // a signal or the time limit; none when the run finished
  bool early_stopped = false;
  int64_t evals_since_best = 0;  // evaluations since the best one (early stopping counts them)
  int64_t step = 0, first_step = 0, last_epoch = 0;
  int64_t skipped_steps = 0;  // overflow steps the grad scaler skipped
  double train_seconds = 0, wait_seconds = 0;
  // Steps recorded by --profile and their time, start and stop included: not throughput.
  int64_t profiled_steps = 0;
  double profiled_seconds = 0;
  double best_score = 0;  // the monitored metric's best, signed so that higher is better
  EvalResult last_eval, last_ema_eval;
  // With a target: whether it was reached, at which step, after how much training time
  // (evaluation excluded, as MLPerf counts it), and the evaluations' own time.
  bool target_reached = false;
  double target_metric = std::numeric_limits<double>::quiet_NaN();  // at the last evaluation (NaN: none ran)
  double target_train_seconds = 0, eval_seconds = 0;
};

// The first global batch of an epoch to train after `samples` of it: the next whole one (after a
// change of global batch, the rest of the one the position cuts is skipped, never trained twice).
inline int64_t first_global_batch(int64_t samples, int64_t global) { return (samples + global - 1) / global; }

// Throws a usage error when one optimizer step needs more samples than the training split
// has: checked before the run folder is started, so such a run leaves nothing behind.
void check_steps_fit(const Session& session);

// Runs from `start` (a fresh CheckpointMeta, or the one a resume loaded) until the run is done
// or must stop; every checkpoint holds `config_record`. `run_start` is when the process began
// (the time limit counts from it). `folder` is null on the ranks other than 0. A stopped run has written its "stopped" record and said how
// to resume.
FitResult fit(Session& session, RunFolder* folder, const CheckpointMeta& start, const nlohmann::json& config_record,
              std::chrono::steady_clock::time_point run_start, const FitOptions& options = {});

}  // namespace gputrain
