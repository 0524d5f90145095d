// --auto_batch_size: grow, then bisect, with a safety margin. Each probe is a real forward and
// backward (under the run's autocast) on random inputs of the right shape; weights are untouched.
#include "train/auto_batch.h"

#include "core/error.h"
#include "core/memory_format.h"
#include "data/schema.h"

namespace gputrain {

namespace {

// A batch of `b` random samples shaped as `data`'s: classes drawn for a class target, zeros for
// other integer fields (ids and masks any model takes), the longest size for a varying field.
Batch probe_batch(const Dataset& data, int64_t b, torch::Device device) {
  auto on = torch::TensorOptions().device(device);
  const int64_t classes = data.num_classes();
  if (!data.named_fields()) {
    std::vector<int64_t> dims{b};
    for (int64_t d : data.sample_shape()) dims.push_back(d);
    Batch batch{torch::randn(dims, on), classes > 0 ? torch::randint(0, classes, {b}, on.dtype(torch::kLong))
                                                    : torch::randn({b, data.target_numel()}, on)};
    return batch;
  }
  const SampleSchema schema = schema_of(data);
  Batch batch;
  batch.target = schema.target;
  for (const auto& f : schema.fields) {
    std::vector<int64_t> dims{b};
    for (int64_t d : f.shape) dims.push_back(d < 0 ? std::max<int64_t>(f.longest, 1) : d);
    const bool is_target = f.name == schema.target;
    batch.names.push_back(f.name);
    batch.tensors.push_back(f.dtype == DType::kF32 ? torch::randn(dims, on)
                            : is_target && classes > 0 ? torch::randint(0, classes, dims, on.dtype(torch::kLong))
                                                       : torch::zeros(dims, on.dtype(torch::kLong)));
  }
  return batch;
}

}  // namespace

BatchSearch find_batch_size(Trainer& trainer, const Dataset& data, int64_t start, int64_t cap) {
  BatchSearch s;
  auto fits = [&](int64_t b) {
    const auto& ctx = trainer.context();
    Batch batch = probe_batch(data, b, ctx.device);
    if (ctx.channels_last && !data.named_fields()) batch.x() = to_channels_last(batch.x());
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
