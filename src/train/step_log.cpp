// The fit loop's figures between log steps (step_log.h).
#include "train/step_log.h"

#include <cmath>

namespace gputrain {

StepLog::StepLog(torch::Device device) {
  auto device_long = torch::TensorOptions().dtype(torch::kLong).device(device);
  bad_run_ = torch::zeros({}, device_long);
  worst_bad_run_ = torch::zeros({}, device_long);
}

void StepLog::start_window() {
  loss_sum_ = torch::Tensor();
  steps_ = 0;
  start_ = std::chrono::steady_clock::now();
}

void StepLog::add(const StepResult& r) {
  if (r.skipped.defined()) skipped_ = skipped_.defined() ? skipped_ + r.skipped : r.skipped.clone();
  bad_run_ = torch::where(torch::isfinite(r.loss), torch::zeros_like(bad_run_), bad_run_ + 1);
  worst_bad_run_ = torch::maximum(worst_bad_run_, bad_run_);
  loss_sum_ = loss_sum_.defined() ? loss_sum_ + r.loss : r.loss;
  ++steps_;
}

StepLog::Window StepLog::close(const Parallelism& parallel, int64_t batch_size, nlohmann::json& record) {
  Window w;
  const auto now = std::chrono::steady_clock::now();
  w.seconds = std::chrono::duration<double>(now - start_).count();
  w.steps = steps_;
  w.step_ms = 1000.0 * w.seconds / static_cast<double>(steps_);
  // Reading the loss to print it syncs the host with the device: only here.
  w.loss = parallel.log_window(loss_sum_, steps_, batch_size, w.step_ms, record, w.tail);
  start_window();
  return w;
}

int64_t StepLog::skipped_steps() const { return skipped_.defined() ? std::llround(skipped_.item<double>()) : 0; }

}  // namespace gputrain
