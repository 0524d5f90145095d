// CsvDataset: resolves columns and the task, parses every number once, then serves copies.
#include "data/csv_dataset.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "data/labels.h"

namespace gputrain {
namespace {

// Full-match number parsing: "1.5", "-2", "3e4", "+7". Rejects "", "1.5x", "nan", "inf" and
// values beyond float range, since any of them would poison training silently.
bool parse_number(std::string_view s, float& out) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return false;
  if (std::fabs(v) > std::numeric_limits<float>::max()) return false;
  out = static_cast<float>(v);
  return true;
}

bool parse_integer(std::string_view s, int64_t& out) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// A cell value for a message: quoted, and cut short when long.
std::string shown(std::string_view v) { return "'" + std::string(v.substr(0, 40)) + (v.size() > 40 ? "...'" : "'"); }

// The column list for a message, cut short for very wide files.
std::string list_of(const std::vector<std::string>& names, size_t max = 20) {
  if (names.size() <= max) return join(names, ", ");
  std::vector<std::string> head(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(max));
  return fmt::format("{}, ... ({} more)", join(head, ", "), names.size() - max);
}

class Builder {
 public:
  Builder(const CsvTable& t) : t_(t) {}

  Error fail(const std::string& why, std::string hint = "") const {
    return usage_error("CSV file '" + t_.path + "': " + why, std::move(hint));
  }
  Error cell_fail(int64_t row, int64_t col, const std::string& why, std::string hint) const {
    return fail(fmt::format("line {}, column '{}': {}", t_.line(row), t_.columns[static_cast<size_t>(col)], why),
                std::move(hint));
  }

  int64_t column(const std::string& name, const char* role) const {
    int64_t c = t_.column_index(name);
    if (c < 0)
      throw fail(std::string("no ") + role + " column '" + name + "'" + did_you_mean(name, t_.columns),
                 "the columns are: " + list_of(t_.columns));
    return c;
  }

  // Column indices for `names`, each once.
  std::vector<int64_t> columns(const std::vector<std::string>& names, const char* role) const {
    std::vector<int64_t> out;
    for (const auto& n : names) {
      int64_t c = column(n, role);
      if (std::find(out.begin(), out.end(), c) != out.end())
        throw fail(std::string(role) + " column '" + n + "' is listed twice");
      out.push_back(c);
    }
    return out;
  }

  // Parses the given columns of every row into a rows x cols float matrix.
  std::vector<float> numbers(const std::vector<int64_t>& cols, const char* role) const {
    std::vector<float> out(static_cast<size_t>(t_.rows()) * cols.size());
    float* p = out.data();
    for (int64_t r = 0; r < t_.rows(); ++r)
      for (int64_t c : cols) {
        std::string_view v = t_.cell(r, c);
        if (v.empty())
          throw cell_fail(r, c, "the cell is empty",
                          "fill in or drop rows with missing values; gputrain does not impute them");
        if (!parse_number(v, *p++))
          throw cell_fail(r, c, shown(v) + " is not a finite number",
                          std::string(role) == "feature"
                              ? "feature columns must hold numbers; leave text columns out by listing the "
                                "features to use, or encode them as numbers"
                              : "regression targets must be numbers; use task classification for labels");
      }
    return out;
  }

 private:
  const CsvTable& t_;
};

}  // namespace

CsvDataset::CsvDataset(const CsvTable& table, const CsvOptions& options, const std::vector<std::string>* classes) {
  Builder b(table);
  if (options.targets.empty())
    throw b.fail("no target column given", "name the label column(s); the columns are: " + list_of(table.columns));
  if (options.task != "auto" && options.task != "classification" && options.task != "regression")
    throw b.fail("unknown task '" + options.task + "'", "use auto, classification or regression");
  if (options.window < 0)
    throw b.fail(fmt::format("window must be 0 (one row per sample) or more, got {}", options.window));
  if (options.window > 0 && options.stride < 1)
    throw b.fail(fmt::format("stride must be 1 or more, got {}", options.stride));
  if (options.window > 0 && options.horizon < 0)
    throw b.fail(fmt::format("horizon must be 0 or more, got {}", options.horizon));

  std::vector<int64_t> target_cols = b.columns(options.targets, "target");
  std::vector<int64_t> feature_cols;
  if (options.features.empty()) {
    for (int64_t c = 0; c < table.cols(); ++c)
      if (std::find(target_cols.begin(), target_cols.end(), c) == target_cols.end()) feature_cols.push_back(c);
    if (feature_cols.empty())
      throw b.fail("no feature columns: every column is a target", "add input columns to the file");
  } else {
    feature_cols = b.columns(options.features, "feature");
    // In a window the target's past values are fair inputs (forecasting); in a single row the
    // target itself would be the answer.
    if (options.window == 0)
      for (int64_t c : feature_cols)
        if (std::find(target_cols.begin(), target_cols.end(), c) != target_cols.end())
          throw b.fail("column '" + table.columns[static_cast<size_t>(c)] + "' is both a feature and a target",
                       "the model would see the answer; leave it out of the features");
  }
  for (int64_t c : feature_cols) feature_names_.push_back(table.columns[static_cast<size_t>(c)]);
  for (int64_t c : target_cols) target_names_.push_back(table.columns[static_cast<size_t>(c)]);
  rows_ = table.rows();

  // Resolve the task. A single column of integers or words reads as labels; any fractional
  // value, or several target columns, reads as regression.
  bool shared = classes != nullptr && !classes->empty();
  task_ = options.task;
  if (task_ == "auto") {
    if (shared) {
      task_ = "classification";
    } else if (target_cols.size() > 1) {
      task_ = "regression";
    } else {
      task_ = "classification";
      float f;
      int64_t i;
      for (int64_t r = 0; r < rows_; ++r) {
        std::string_view v = table.cell(r, target_cols[0]);
        if (parse_number(v, f) && !parse_integer(v, i)) {
          task_ = "regression";
          break;
        }
      }
    }
  }

  if (task_ == "regression") {
    targets_ = b.numbers(target_cols, "target");
  } else {
    if (target_cols.size() != 1)
      throw b.fail(fmt::format("classification takes exactly one target column, got {} ({})", target_cols.size(),
                               join(target_names_, ", ")),
                   "use task regression to predict several numeric columns");
    int64_t col = target_cols[0];
    for (int64_t r = 0; r < rows_; ++r)
      if (table.cell(r, col).empty())
        throw b.cell_fail(r, col, "the label is empty", "every row needs a label; drop unlabelled rows");
    if (shared) {
      classes_ = *classes;
    } else {
      std::unordered_set<std::string> unique;
      for (int64_t r = 0; r < rows_; ++r) unique.emplace(table.cell(r, col));
      classes_.assign(unique.begin(), unique.end());
      // Integer labels sort as numbers (so "10" follows "9"); anything else sorts as text.
      std::vector<int64_t> values(classes_.size());
      bool integers = true;
      for (size_t k = 0; k < classes_.size() && integers; ++k) integers = parse_integer(classes_[k], values[k]);
      if (integers) {
        std::vector<size_t> order(classes_.size());
        for (size_t k = 0; k < order.size(); ++k) order[k] = k;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t c) {
          return values[a] != values[c] ? values[a] < values[c] : classes_[a] < classes_[c];
        });
        std::vector<std::string> sorted;
        for (size_t k : order) sorted.push_back(classes_[k]);
        classes_ = std::move(sorted);
      } else {
        std::sort(classes_.begin(), classes_.end());
      }
    }
    class_count_ = check_class_names(fmt::format("CSV file '{}', column '{}'", table.path, table.columns[static_cast<size_t>(col)]),
                                     static_cast<int64_t>(classes_.size()), options.num_classes);
    std::unordered_map<std::string_view, int64_t> index;  // views of classes_, which stays put
    for (size_t k = 0; k < classes_.size(); ++k) index.emplace(classes_[k], static_cast<int64_t>(k));
    labels_.resize(static_cast<size_t>(rows_));
    for (int64_t r = 0; r < rows_; ++r) {
      auto it = index.find(table.cell(r, col));
      if (it == index.end())
        throw b.cell_fail(r, col,
                          fmt::format("label {} is not one of the {} classes of the training split",
                                      shown(table.cell(r, col)), classes_.size()),
                          "the classes are: " + list_of(classes_));
      labels_[static_cast<size_t>(r)] = it->second;
    }
  }

  features_ = b.numbers(feature_cols, "feature");

  if (options.window == 0) {
    samples_ = rows_;
  } else {
    window_ = options.window;
    stride_ = options.stride;
    horizon_ = options.horizon;
    // Compared piecewise so huge settings cannot overflow.
    if (window_ > rows_ || horizon_ > rows_ - window_)
      throw b.fail(fmt::format("a window of {} rows plus a horizon of {} needs more rows than the file's {}", window_,
                               horizon_, rows_),
                   "use a smaller window or horizon, or a longer series");
    samples_ = (rows_ - window_ - horizon_) / stride_ + 1;
  }
}

std::vector<int64_t> CsvDataset::sample_shape() const {
  int64_t f = static_cast<int64_t>(feature_names_.size());
  if (window_ > 0) return {window_, f};
  return {f};
}

std::vector<int64_t> CsvDataset::target_shape() const {
  if (task_ == "regression") return {static_cast<int64_t>(target_names_.size())};
  return {};
}

int64_t CsvDataset::target_row(int64_t index) const {
  return window_ > 0 ? first_row(index) + window_ - 1 + horizon_ : index;
}

int64_t CsvDataset::get(int64_t index, float* x, float* target, uint64_t /*seed*/) const {
  if (index < 0 || index >= samples_)
    throw runtime_error(fmt::format("CSV sample {} is out of range (the dataset has {})", index, samples_));
  size_t f = feature_names_.size();
  int64_t first = window_ > 0 ? first_row(index) : index;
  int64_t count = window_ > 0 ? window_ : 1;
  // Rows are stored contiguously, so a whole window is one copy.
  std::memcpy(x, features_.data() + static_cast<size_t>(first) * f, static_cast<size_t>(count) * f * sizeof(float));
  int64_t row = target_row(index);
  if (task_ == "regression") {
    size_t t = target_names_.size();
    std::memcpy(target, targets_.data() + static_cast<size_t>(row) * t, t * sizeof(float));
    return 0;
  }
  return labels_[static_cast<size_t>(row)];
}

std::shared_ptr<CsvDataset> load_csv_dataset(const std::string& path, const CsvOptions& options,
                                             const std::vector<std::string>* classes) {
  CsvTable table = read_csv(path);
  return std::make_shared<CsvDataset>(table, options, classes);
}

}  // namespace gputrain
