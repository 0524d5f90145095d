// Learning-rate schedules (constant, step, cosine, one-cycle) with linear warm-up, per step.
#pragma once
#include <cstdint>
#include <string>

namespace gputrain {

struct LrSchedule {
  std::string kind = "constant";  // constant | step | cosine | onecycle
  double base_lr = 1e-3;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  int64_t steps_per_epoch = 1;
  int64_t step_size_epochs = 1;  // step schedule
  double gamma = 0.1;            // step schedule

  // The learning rate for optimizer step `step` (0-based).
  double at(int64_t step) const;
};

}  // namespace gputrain
