// Dataset wrappers that select samples: a subset by index list, and a seeded train/validation split.
#include "data/subset.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {

std::pair<DatasetPtr, DatasetPtr> split_validation(DatasetPtr data, double fraction, uint64_t seed,
                                                   DatasetPtr eval_view) {
  const int64_t n = data->size();
  const int64_t val = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
  if (val < 1 || val >= n)
    throw usage_error(fmt::format("--val_split {:f} of {} samples leaves an empty split", fraction, n),
                      "use a fraction between 0 and 1 that keeps samples on both sides");
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  Rng rng(mix_seed(seed, 0x5a11));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  std::vector<int64_t> train(order.begin() + val, order.end()), held(order.begin(), order.begin() + val);
  return {std::make_shared<SubsetDataset>(data, std::move(train)),
          std::make_shared<SubsetDataset>(eval_view ? eval_view : data, std::move(held))};
}

}  // namespace gputrain
