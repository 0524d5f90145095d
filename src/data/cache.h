// --cache: keeps decoded samples in memory, so each file is read and decoded once per run.
#pragma once
#include <atomic>
#include <memory>

#include "data/dataset.h"

namespace gputrain {

// Wraps the deterministic part of the pipeline (decode, resize), below random augmentation.
// The first get() of a sample fills its slot; later ones copy from memory. Thread-safe.
class CachedDataset : public DatasetWrapper {
 public:
  // Throws a usage error when the cache would not fit in this machine's memory.
  explicit CachedDataset(DatasetPtr base);
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;
  int64_t bytes() const;

 private:
  int64_t numel_, tnumel_;
  // Pages are committed only when written: an unfilled cache costs address space, not memory.
  std::unique_ptr<float[]> x_, t_;
  std::unique_ptr<int64_t[]> labels_;
  mutable std::unique_ptr<std::atomic<uint8_t>[]> state_;  // 0 empty, 1 being filled, 2 ready
};

}  // namespace gputrain
