// When the fit loop stops between steps (stop_policy.h).
#include "train/stop_policy.h"

#include <algorithm>
#include <csignal>

#include "core/signals.h"
#include "core/text.h"

namespace gputrain {

StopPolicy::StopPolicy(const std::string& time_limit, Clock::time_point run_start, double save_seconds,
                       int64_t log_every)
    : limit_text_(time_limit),
      limit_(time_limit.empty() ? 0 : parse_duration(time_limit)),
      run_start_(run_start),
      save_seconds_(save_seconds),
      log_every_(log_every) {}

StopReason StopPolicy::now(double reserve) const {
  if (stop_signal()) return {stop_signal() == SIGTERM ? StopReason::Kind::kSigterm : StopReason::Kind::kSigint};
  // The limit coming within `reserve` plus a save and a little slack (2 s, or a tenth of a short
  // limit, so that a limit of a few seconds still trains until it is near).
  const double slack = std::min(2.0, 0.1 * limit_);
  const double elapsed = std::chrono::duration<double>(Clock::now() - run_start_).count();
  if (limit_ > 0 && elapsed + reserve + 3 * save_seconds_ + slack >= limit_)
    return {StopReason::Kind::kTimeLimit, limit_text_};
  return {};
}

StopReason StopPolicy::after_step(int64_t step, double seconds, bool log_step, const Parallelism& parallel) {
  // The session's first step (allocations, autotuning) is replaced by the second, not averaged in.
  step_seconds_ = steps_timed_++ < 2 ? seconds : 0.7 * step_seconds_ + 0.3 * seconds;
  const StopReason local = now(static_cast<double>(every_ + 1) * step_seconds_ + eval_seconds_);
  if (!log_step && step % every_ != 0) return {};
  int64_t every = std::clamp<int64_t>(static_cast<int64_t>(kCheckSeconds / std::max(step_seconds_, 1e-6)), 1, log_every_);
  const StopReason agreed = parallel.agree_stop(local, every);
  every_ = every;
  return agreed;
}

}  // namespace gputrain
