// --auto_batch_size: the largest micro-batch whose forward and backward fit in device memory.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "step/trainer.h"

namespace gputrain {

struct BatchSearch {
  int64_t batch_size = 0;  // the result: the largest fit, minus the safety margin
  int64_t largest_fit = 0;
  std::vector<std::pair<int64_t, bool>> trials;  // (batch size, fit)
};

// Grows from `start` by doubling until a probe runs out of memory (or reaches `cap`), bisects
// between the last fit and the first failure, then keeps a 10% margin (the optimizer's state
// and fragmentation need room too). The probes' batches have `data`'s fields, a varying one at
// the data's longest sample. Throws a runtime error when not even one sample fits.
BatchSearch find_batch_size(Trainer& trainer, const Dataset& data, int64_t start, int64_t cap);

}  // namespace gputrain
