// The fit loop's figures between two log steps, kept on the device until a log step reads them
// (one host sync per log step): the loss, the runs of non-finite losses the NaN guard counts, and
// the steps the grad scaler skipped.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "step/trainer.h"
#include "train/parallelism.h"

namespace gputrain {

class StepLog {
 public:
  explicit StepLog(torch::Device device);

  // At an epoch's start: a window does not span the evaluation between epochs.
  void start_window();
  // After every step.
  void add(const StepResult& r);

  struct Window {
    double loss = 0;     // the job's mean loss over the window (every rank's, weighted by its share)
    double seconds = 0;  // since the last log step
    double step_ms = 0;
    int64_t steps = 0;
    std::string tail;  // the ranks' figures, for the end of the progress line
  };
  // At a log step: the window's figures (the ranks' added to `record`), and the next window starts.
  Window close(const Parallelism& parallel, int64_t batch_size, nlohmann::json& record);
  // Device reads: the longest run of consecutive non-finite losses, and the steps skipped.
  int64_t worst_bad_run() const { return worst_bad_run_.item<int64_t>(); }
  int64_t skipped_steps() const;

 private:
  torch::Tensor loss_sum_;
  torch::Tensor bad_run_, worst_bad_run_;
  torch::Tensor skipped_;  // overflow steps the scaler skipped (undefined without a scaler)
  int64_t steps_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace gputrain
