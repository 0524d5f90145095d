// Dataset wrappers that select samples: a subset by index list, and a seeded train/validation split.
#include "data/subset.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {

std::vector<int64_t> SubsetDataset::stream_order(uint64_t seed, int64_t epoch, bool shuffle) const {
  const auto base = base_->stream_order(seed, epoch, shuffle);
  if (base.empty()) return {};
  std::vector<int64_t> position(static_cast<size_t>(base_->size()), -1);  // base index -> subset index
  for (size_t i = 0; i < indices_.size(); ++i) position[static_cast<size_t>(indices_[i])] = static_cast<int64_t>(i);
  std::vector<int64_t> out;
  out.reserve(indices_.size());
  for (int64_t b : base)
    if (position[static_cast<size_t>(b)] >= 0) out.push_back(position[static_cast<size_t>(b)]);
  return out;
}

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
