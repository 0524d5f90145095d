// --auto_batch_size: grow, then bisect, with a safety margin. Each probe is a real forward and
// backward (under the run's autocast) on random inputs of the right shape; weights are untouched.
#include "train/auto_batch.h"

#include "core/error.h"
#include "core/memory_format.h"

namespace gputrain {

BatchSearch find_batch_size(Trainer& trainer, const std::vector<int64_t>& sample_shape, int64_t num_classes,
                            int64_t num_targets, int64_t start, int64_t cap) {
  BatchSearch s;
  auto fits = [&](int64_t b) {
    std::vector<int64_t> dims{b};
    dims.insert(dims.end(), sample_shape.begin(), sample_shape.end());
    const auto& ctx = trainer.context();
    auto on = torch::TensorOptions().device(ctx.device);
    Batch batch{torch::randn(dims, on), num_classes > 0 ? torch::randint(0, num_classes, {b}, on.dtype(torch::kLong))
                                                        : torch::randn({b, num_targets}, on)};
    if (ctx.channels_last) batch.x() = to_channels_last(batch.x());
    bool ok = trainer.probe(batch);
    s.trials.push_back({b, ok});
    return ok;
  };
  int64_t good = 0, bad = 0;
  int64_t b = std::min(start, cap);
  if (fits(b)) {
    good = b;
    while (good < cap) {
      int64_t next = std::min(good * 2, cap);
      if (!fits(next)) {
        bad = next;
        break;
      }
      good = next;
    }
  } else {
    bad = b;
    while (bad > 1) {
      int64_t next = bad / 2;
      if (fits(next)) {
        good = next;
        break;
      }
      bad = next;
    }
    if (good == 0) throw runtime_error("out of memory even with a batch of 1 sample", "use a smaller model or --width");
  }
  // Bisect (good fits, bad does not) down to a 1/16 relative gap.
  while (bad > 0 && bad - good > std::max<int64_t>(1, good / 16)) {
    int64_t mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  s.largest_fit = good;
  s.batch_size = good == cap ? good : std::max<int64_t>(1, good * 9 / 10);
  if (s.batch_size >= 16) s.batch_size -= s.batch_size % 8;  // multiples of 8 suit tensor cores
  return s;
}

}  // namespace gputrain
