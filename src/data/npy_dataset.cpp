// Datasets from NumPy arrays: an x array (N, ...) and a y array of labels or regression targets.
#include "data/npy_dataset.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "data/labels.h"

namespace gputrain {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("({}{})", fmt::join(shape, ", "), shape.size() == 1 ? "," : "");
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Float features or targets: every value must be finite (callers skip integer arrays).
void check_finite_array(const NpyArray& a, const std::string& what) {
  check_finite(a.path, what, a.numel, [&a](int64_t first, int64_t count, float* out) { a.to_float(first, count, out); });
}

}  // namespace

NpyDataset::NpyDataset(NpyArray x, NpyArray y, const std::string& task, int64_t classes)
    : x_(std::move(x)), y_(std::move(y)) {
  if (task != "classification" && task != "regression" && task != "auto")
    throw usage_error("unknown task '" + task + "' for " + y_.path, "use classification, regression or auto");
  if (x_.shape.empty())
    throw usage_error(x_.path + ": x is a scalar; it must have shape (N, ...) with one row per sample",
                      "save the samples stacked along the first axis");
  if (y_.shape.empty())
    throw usage_error(y_.path + ": y is a scalar; it must have shape (N) or (N, ...)",
                      "save one label or target per sample");
  n_ = x_.shape[0];
  if (n_ == 0) throw usage_error(x_.path + ": no samples (shape " + shape_text(x_.shape) + ")", "");
  if (y_.shape[0] != n_)
    throw usage_error(
        fmt::format("{} has {} samples but {} has {} (shapes {} and {}: the arrays do not belong together)", x_.path,
                    n_, y_.path, y_.shape[0], shape_text(x_.shape), shape_text(y_.shape)),
        "x and y must have the same first dimension");
  sample_shape_.assign(x_.shape.begin() + 1, x_.shape.end());
  if (sample_shape_.empty()) sample_shape_ = {1};  // a 1-D x is one feature per sample
  x_numel_ = numel(sample_shape_);
  if (!x_.is_integer()) check_finite_array(x_, "feature");

  bool classify = task == "classification" || (task == "auto" && y_.is_integer() && y_.shape.size() == 1);
  if (!classify) {
    target_shape_.assign(y_.shape.begin() + 1, y_.shape.end());
    if (target_shape_.empty()) target_shape_ = {1};
    y_numel_ = numel(target_shape_);
    if (y_numel_ == 0)
      throw usage_error(y_.path + ": regression targets are empty (shape " + shape_text(y_.shape) + ")", "");
    if (!y_.is_integer()) check_finite_array(y_, "target");
    return;
  }
  if (y_.shape.size() != 1)
    throw usage_error(y_.path + ": classification labels must be 1-D (N,), got shape " + shape_text(y_.shape),
                      "pass --task regression for multi-valued targets, or save one class index per sample");
  // Checked once here, so get() can trust every label.
  classes_ = check_class_indices(y_.path, n_, [this](int64_t i) { return y_.at(i); }, classes);
}

int64_t NpyDataset::get(int64_t index, float* x, float* target, uint64_t) const {
  x_.to_float(index * x_numel_, x_numel_, x);  // range-checked there
  if (classes_ == 0) {
    y_.to_float(index * y_numel_, y_numel_, target);
    return 0;
  }
  return static_cast<int64_t>(y_.at(index));
}

std::shared_ptr<NpyDataset> load_npy_dataset(const std::string& x_path, const std::string& y_path,
                                             const std::string& split, const std::string& task, int64_t classes) {
  if (ends_with(x_path, ".npz")) {
    if (!y_path.empty())
      throw usage_error(y_path + ": a y file is not used with an .npz archive (" + x_path + " holds both arrays)",
                        "drop the y path, or pass x and y as two .npy files");
    std::vector<std::string> keys = npz_keys(x_path);
    auto has = [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
    std::string xk = "x_" + split, yk = "y_" + split;
    if (!has(xk) || !has(yk)) {
      // Keras-style archives name every split; plain ones hold a single x and y.
      if (has("x") && has("y")) {
        xk = "x";
        yk = "y";
      } else {
        std::string list;
        for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
        throw usage_error(x_path + ": no arrays '" + xk + "' and '" + yk +
                              "' (nor 'x' and 'y'); the archive holds: " + (list.empty() ? "no arrays" : list),
                          "save with np.savez(path, x_" + split + "=x, y_" + split + "=y) or np.savez(path, x=x, y=y)");
      }
    }
    auto arrays = read_npz(x_path, {xk, yk});
    return std::make_shared<NpyDataset>(arrays.at(xk), arrays.at(yk), task, classes);
  }
  if (ends_with(x_path, ".npy")) {
    if (y_path.empty())
      throw usage_error(x_path + ": an .npy x file needs a y file (.npy) with the labels or targets",
                        "pass the y .npy path too, or put both arrays in one archive: np.savez(path, x=x, y=y)");
    return std::make_shared<NpyDataset>(read_npy(x_path), read_npy(y_path), task, classes);
  }
  throw usage_error(x_path + ": not a NumPy file (expected a name ending in .npy or .npz)",
                    "save arrays with numpy.save (.npy) or numpy.savez (.npz)");
}

bool npz_has_split(const std::string& path, const std::string& split) {
  std::vector<std::string> keys = npz_keys(path);
  auto has = [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  return has("x_" + split) && has("y_" + split);
}

}  // namespace gputrain
