// A step's batches: the training loader's micro-batches, --accumulation_steps at a time, and
// where the epoch stands in them (what a checkpoint records). The fit loop takes them epoch by
// epoch; the benchmark takes them endlessly (Session::benchmark_batches).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "data/loader.h"

namespace gputrain {

class StepBatches {
 public:
  StepBatches(std::shared_ptr<const Dataset> train, const LoaderOptions& options, int64_t accumulation_steps);

  int64_t micro_per_epoch() const { return micro_per_epoch_; }
  int64_t steps_per_epoch() const { return micro_per_epoch_ / accumulation_; }
  // Starts `epoch` after its first `consumed` micro-batches (a resume inside it).
  void start_epoch(int64_t epoch, int64_t consumed);
  // The next step's micro-batches, in `micro`; false at the epoch's tail (fewer left than a step
  // takes), never when endless.
  bool next(std::vector<Batch>& micro);
  // From epoch 0 on without end: a tail starts the next epoch. With `cycle_steps` > 0, that many
  // steps' batches are loaded now and cycled (no loading while a benchmark times the steps).
  void run_endless(int64_t cycle_steps);
  // Micro-batches taken this epoch (each one global batch over the ranks).
  int64_t consumed() const { return consumed_; }
  // Whether the epoch has no whole step left.
  bool epoch_done() const { return consumed_ + accumulation_ > micro_per_epoch_; }
  // Seconds the loop waited for batches since the last call.
  double take_wait_seconds() { return loader_.take_wait_seconds(); }

 private:
  Loader loader_;
  int64_t accumulation_, micro_per_epoch_;
  int64_t consumed_ = 0;
  bool endless_ = false;
  int64_t epoch_ = 0;
  std::vector<Batch> cycle_;  // run_endless's loaded batches
  size_t cycle_at_ = 0;

  std::optional<Batch> fetch();
};

}  // namespace gputrain
