// The fit loop's batches (step_batches.h).
#include "train/step_batches.h"

namespace gputrain {

StepBatches::StepBatches(std::shared_ptr<const Dataset> train, const LoaderOptions& options, int64_t accumulation_steps)
    : loader_(std::move(train), options), accumulation_(accumulation_steps), micro_per_epoch_(loader_.num_batches()) {}

void StepBatches::start_epoch(int64_t epoch, int64_t consumed) {
  epoch_ = epoch;
  consumed_ = consumed;
  loader_.start_epoch(epoch, consumed);
}

void StepBatches::run_endless(int64_t cycle_steps) {
  endless_ = true;
  start_epoch(0, 0);
  for (int64_t i = 0; i < cycle_steps * accumulation_; ++i) cycle_.push_back(*fetch());
}

std::optional<Batch> StepBatches::fetch() {
  auto b = loader_.next();
  if (!b && endless_) {
    start_epoch(epoch_ + 1, 0);
    b = loader_.next();
  }
  return b;
}

bool StepBatches::next(std::vector<Batch>& micro) {
  micro.clear();
  while (static_cast<int64_t>(micro.size()) < accumulation_) {
    if (!cycle_.empty()) {
      micro.push_back(cycle_[cycle_at_++ % cycle_.size()]);
      continue;
    }
    auto host = fetch();
    if (!host) return false;
    micro.push_back(std::move(*host));
  }
  consumed_ += accumulation_;
  return true;
}

}  // namespace gputrain
