// Water-filling: ranks at their memory limit keep it; the rest of the batch goes to the others
// in proportion to speed, until no rank is over its limit.
#include "parallel/balance.h"

#include <algorithm>
#include <cmath>

namespace gputrain {
namespace {

bool limited(double cap) { return cap > 0; }

}  // namespace

std::vector<int64_t> split_by_speed(const std::vector<double>& seconds, const std::vector<double>& capacity,
                                    int64_t global) {
  const size_t n = seconds.size();
  double room = 0;
  bool unlimited = false;
  for (size_t r = 0; r < n; ++r) {
    if (limited(capacity[r]))
      room += std::floor(capacity[r]);
    else
      unlimited = true;
  }
  const bool fits = unlimited || room >= static_cast<double>(global);
  std::vector<double> share(n, 0);
  std::vector<bool> capped(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    double left = static_cast<double>(global), speed = 0;
    for (size_t r = 0; r < n; ++r) {
      if (capped[r])
        left -= share[r];
      else
        speed += 1.0 / seconds[r];
    }
    for (size_t r = 0; r < n; ++r)
      if (!capped[r]) share[r] = left * (1.0 / seconds[r]) / speed;
    for (size_t r = 0; fits && r < n; ++r)
      if (!capped[r] && limited(capacity[r]) && share[r] > std::floor(capacity[r])) {
        share[r] = std::floor(capacity[r]);
        capped[r] = changed = true;
      }
  }
  std::vector<int64_t> sizes;
  int64_t assigned = 0;
  for (size_t r = 0; r < n; ++r) {
    sizes.push_back(std::max<int64_t>(1, std::llround(share[r])));
    assigned += sizes.back();
  }
  // Rounding: the largest rank with room takes up the difference (never below 1).
  size_t take = 0;
  for (size_t r = 0; r < n; ++r)
    if (!capped[r] && (capped[take] || sizes[r] > sizes[take])) take = r;
  sizes[take] = std::max<int64_t>(1, sizes[take] + global - assigned);
  return sizes;
}

}  // namespace gputrain
