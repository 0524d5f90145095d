// Length bucketing (length_buckets.h).
#include "data/length_buckets.h"

#include <algorithm>

namespace gputrain {

void bucket_by_length(std::vector<int64_t>& order, int64_t window, const Dataset& data) {
  if (window < 2 || order.empty() || data.sample_length(order.front()) < 0) return;
  for (size_t begin = 0; begin < order.size(); begin += static_cast<size_t>(window)) {
    const auto end = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), begin + static_cast<size_t>(window)));
    // Stable: samples of one length keep their shuffled order.
    std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(begin), end,
                     [&](int64_t a, int64_t b) { return data.sample_length(a) > data.sample_length(b); });
  }
}

double padding_share(const std::vector<int64_t>& order, int64_t batch, const Dataset& data) {
  double tokens = 0, padded = 0;
  for (size_t begin = 0; begin < order.size(); begin += static_cast<size_t>(batch)) {
    const size_t end = std::min(order.size(), begin + static_cast<size_t>(batch));
    int64_t longest = 0;
    for (size_t i = begin; i < end; ++i) {
      const int64_t n = data.sample_length(order[i]);
      if (n < 0) return 0;
      tokens += static_cast<double>(n);
      longest = std::max(longest, n);
    }
    padded += static_cast<double>(longest) * static_cast<double>(end - begin);
  }
  return padded > 0 ? 1 - tokens / padded : 0;
}

}  // namespace gputrain
