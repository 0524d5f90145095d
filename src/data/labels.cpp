// Load-time checks of labels and values, shared by every dataset format.
#include "data/labels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {
namespace {

// More classes than this is almost certainly a regression target or ids, not labels.
constexpr int64_t kMaxClasses = 1'000'000;

const char* const kInferHint =
    "pass --num_classes K when the data simply lacks some of K classes, map the labels to 0..K-1 "
    "(np.unique(y, return_inverse=True)), or pass --task regression for numbers to predict";

}  // namespace

int64_t check_class_indices(const std::string& file, int64_t n, const std::function<double(int64_t)>& label,
                            int64_t given, const std::function<std::string(int64_t)>& name) {
  const int64_t limit = given > 0 ? given : kMaxClasses;
  std::vector<int64_t> count;
  for (int64_t i = 0; i < n; ++i) {
    const double v = label(i);
    if (v >= 0 && v < static_cast<double>(limit) && v == std::floor(v)) {
      const auto k = static_cast<size_t>(v);
      if (k >= count.size()) count.resize(k + 1);
      ++count[k];
      continue;
    }
    std::string why = std::isnan(v)            ? "is NaN"
                      : v < 0                  ? "is negative"
                      : v != std::floor(v)     ? "is not a whole number"
                      : given > 0              ? fmt::format("is outside 0..{} ({} classes)", given - 1, given)
                                               : fmt::format("is {} or more", kMaxClasses);
    const std::string value = fmt::format("{:.9g}", v);
    throw usage_error(name ? fmt::format("{}: label {} {}", name(i), value, why)
                           : fmt::format("{}: label {} at index {} {}", file, value, i, why),
                      given > 0 ? fmt::format("labels must be class indices below {}: pass a larger --num_classes, "
                                              "or fix the labels",
                                              given)
                                : std::string(kInferHint));
  }
  if (given > 0) return given;
  const auto classes = static_cast<int64_t>(count.size());
  if (classes < 2)
    throw usage_error(file + (classes ? ": every label is 0: one class only, nothing to classify" : ": no labels"),
                      kInferHint);
  std::vector<int64_t> missing;
  for (int64_t k = 0; k < classes; ++k)
    if (count[static_cast<size_t>(k)] == 0) missing.push_back(k);
  if (!missing.empty())
    throw usage_error(fmt::format("{}: labels run 0..{} but {} of these {} classes have no sample (first: {})", file,
                                  classes - 1, missing.size(), classes, missing.front()),
                      kInferHint);
  return classes;
}

int64_t check_class_names(const std::string& where, int64_t found, int64_t given) {
  if (given > 0 && found > given)
    throw usage_error(fmt::format("{}: {} classes, more than --num_classes {}", where, found, given),
                      "raise --num_classes, or leave it out to use the classes found");
  if (given > 0) return given;
  if (found < 2)
    throw usage_error(fmt::format("{}: {} class{} only, nothing to classify", where, found, found == 1 ? "" : "es"),
                      "classification needs two classes or more; pass --task regression for numbers to predict");
  return found;
}

void check_finite(const std::string& file, const std::string& what, int64_t n,
                  const std::function<void(int64_t, int64_t, float*)>& values) {
  constexpr int64_t kChunk = 1 << 16;
  std::vector<float> buf(static_cast<size_t>(std::min(n, kChunk)));
  int64_t bad = 0, first = -1;
  for (int64_t at = 0; at < n; at += kChunk) {
    const int64_t count = std::min(kChunk, n - at);
    values(at, count, buf.data());
    for (int64_t i = 0; i < count; ++i)
      if (!std::isfinite(buf[static_cast<size_t>(i)]) && bad++ == 0) first = at + i;
  }
  if (bad)
    throw usage_error(fmt::format("{}: {} {} value{} NaN or infinite as float32 (first at flat index {})", file, bad,
                                  what, bad == 1 ? " is" : "s are", first),
                      "clean the data (np.nan_to_num, or drop those rows) before training");
}

}  // namespace gputrain
