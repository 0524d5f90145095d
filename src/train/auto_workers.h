// --num_workers auto and --prefetch_factor auto: the fewest loader threads, and the fewest
// batches in flight per thread, that keep the step from waiting for data.
#pragma once
#include <cstdint>
#include <vector>

#include "data/loader.h"
#include "step/trainer.h"

namespace gputrain {

struct WorkersTrial {
  int64_t workers = 0, prefetch = 0;
  double wait_fraction = 0;  // of the measured time, spent waiting for the next batch
};

struct WorkersChoice {
  int64_t workers = 0, prefetch = 0;
  int64_t steps = 0;  // measured per setting
  std::vector<WorkersTrial> trials;
};

// Tries 0, 1, 2, 4, ... loader threads (up to `cores`; or only options.num_workers when it is
// not kAuto), each with 1, 2 and 4 batches in flight per thread (or only
// options.prefetch_factor when it is not kAuto; the main thread has none), against the real
// step on the training data, and returns the first setting whose data wait is under 5%, else
// the one that waited least.
// Loader threads and the step share the CPU as they will in training. The step is
// trainer.probe (forward and backward, no update); the model's buffers (batch-norm statistics)
// and the random generators are restored after, so the run trains exactly as with that number
// given.
WorkersChoice choose_workers(Trainer& trainer, DatasetPtr train, LoaderOptions options, int cores, int64_t steps = 12);

}  // namespace gputrain
