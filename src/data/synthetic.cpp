// A synthetic image dataset: class pattern plus noise, derived from (seed, index).
#include "data/synthetic.h"

namespace gputrain {

SyntheticDataset::SyntheticDataset(int64_t size, std::vector<int64_t> shape, int64_t num_classes, uint64_t seed,
                                   int64_t first)
    : size_(size), classes_(num_classes), first_(first), shape_(std::move(shape)), seed_(seed) {
  numel_ = 1;
  for (auto d : shape_) numel_ *= d;  // cached: get() runs once per sample
}

int64_t SyntheticDataset::get(int64_t index, float* out, float*, uint64_t) const {
  index += first_;
  Rng pick(mix_seed(seed_, 1, static_cast<uint64_t>(index)));
  int64_t label = static_cast<int64_t>(pick.below(static_cast<uint64_t>(classes_)));
  // The class pattern is regenerated from its seed instead of stored: shapes can be large.
  Rng pattern(mix_seed(seed_, 2, static_cast<uint64_t>(label)));
  Rng noise(mix_seed(seed_, 3, static_cast<uint64_t>(index)));
  for (int64_t i = 0; i < numel_; ++i) out[i] = 0.6f * pattern.uniform() + 0.4f * noise.uniform();
  return label;
}

}  // namespace gputrain
