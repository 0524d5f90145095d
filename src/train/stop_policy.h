// When the fit loop stops between steps: on a signal, or when the next steps, a save and an
// evaluation might not fit before the time limit; with several ranks, at steps where they all
// agree (train/parallelism.h), so that every rank stops after the same step.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "train/parallelism.h"
#include "train/stop_reason.h"

namespace gputrain {

class StopPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  // `time_limit`: --time_limit ("" for none), counted from `run_start`; `save_seconds`: a first
  // guess of a checkpoint save's time, until one is timed.
  StopPolicy(const std::string& time_limit, Clock::time_point run_start, double save_seconds, int64_t log_every);

  // Why to stop now, this process alone ("" kind: none), keeping `reserve` seconds of work ahead.
  StopReason now(double reserve = 0) const;
  // After step `step`, which took `seconds`: the reason every rank agrees on (checked at log steps
  // and about every kCheckSeconds in between; none elsewhere).
  StopReason after_step(int64_t step, double seconds, bool log_step, const Parallelism& parallel);
  // What the deadline keeps room for: the last save's and the last evaluation's time.
  void saved(double seconds) { save_seconds_ = seconds; }
  void evaluated(double seconds) { eval_seconds_ = seconds; }

 private:
  std::string limit_text_;
  double limit_ = 0;  // seconds; 0: none
  Clock::time_point run_start_;
  double save_seconds_, eval_seconds_ = 0;
  int64_t log_every_;
  // A moving average of recent steps' time (data wait included): neither set-up nor the first
  // step's warm-up inflates it.
  double step_seconds_ = 0;
  int64_t steps_timed_ = 0;
  // With several ranks: steps between the ranks' agreements (each a small all-reduce and a host
  // sync), agreed at each check from rank 0's step time so that a stop is acted on within about
  // kCheckSeconds, at most every log step.
  int64_t every_ = 1;
  static constexpr double kCheckSeconds = 0.5;
};

}  // namespace gputrain
