// The end of a training run: its "summary" record in metrics.jsonl and its closing lines.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "train/evaluate.h"

namespace gputrain {

// What a finished run did.
struct RunTotals {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t steps_this_session = 0;  // a resumed run's throughput counts only its own steps
  int64_t samples_per_step = 0;
  int64_t skipped_steps = 0;  // overflow steps the grad scaler skipped
  int64_t bad_samples = 0;
  double wall_seconds = 0;
  double train_seconds = 0;  // in the training loop (no set-up, no evaluation)
  double wait_seconds = 0;   // of those, waiting for the loader
  // Of those, the steps --profile recorded and their time: left out of samples_per_sec.
  int64_t profiled_steps = 0;
  double profiled_seconds = 0;
};

// The "summary" record: totals, throughput, the best and final test metrics.
nlohmann::json summary_record(const RunTotals& t, const std::string& monitored, double best_value,
                              const EvalResult& last_eval, const EvalResult& last_ema_eval);

// One line of host and GPU telemetry from the sampler's totals (Monitor::finish), when it has any.
void print_telemetry(const nlohmann::json& monitor);

// The closing lines: "done: ..." and the run's files.
void print_summary(const nlohmann::json& summary, const std::string& monitored, const Config& c,
                   const std::string& out_dir);

}  // namespace gputrain
