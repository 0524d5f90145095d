// Datasets from CSV tables: one row per sample (tabular) or sliding windows over a time series.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/csv.h"
#include "data/dataset.h"

namespace gputrain {

struct CsvOptions {
  std::vector<std::string> targets;   // label column name(s); required
  std::vector<std::string> features;  // empty = every column that is not a target
  std::string task = "auto";          // auto | classification | regression
  int64_t window = 0;                 // 0 = one row per sample (tabular); >0 = windows of this many rows
  int64_t stride = 1;                 // rows between window starts
  int64_t horizon = 1;                // windows: predict the target this many rows after the last row
  int64_t num_classes = 0;            // --num_classes (0 = the distinct labels)
};

class CsvDataset : public Dataset {
 public:
  // Parses every feature (and regression target) once, so get() only copies. `classes`, when
  // given and non-empty, is the class list to map labels with (the training split's, so a test
  // split numbers classes the same way); it makes task "auto" mean classification, and a label
  // outside it is an error. Throws usage errors naming the file, line and column.
  CsvDataset(const CsvTable& table, const CsvOptions& options, const std::vector<std::string>* classes = nullptr);

  int64_t size() const override { return samples_; }
  std::vector<int64_t> sample_shape() const override;
  int64_t num_classes() const override { return class_count_; }
  std::vector<int64_t> target_shape() const override;
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;

  // "classification" or "regression": what "auto" resolved to.
  std::string task() const { return task_; }
  // Classification: the label of class i is class_names()[i]. Empty for regression.
  const std::vector<std::string>& class_names() const { return classes_; }
  const std::vector<std::string>* label_names() const override { return classes_.empty() ? nullptr : &classes_; }
  const std::vector<std::string>& feature_names() const { return feature_names_; }
  const std::vector<std::string>& target_names() const { return target_names_; }
  int64_t rows() const { return rows_; }
  int64_t window() const { return window_; }

 private:
  // The table row whose target sample `index` predicts, and the first row of its features.
  int64_t first_row(int64_t index) const { return index * stride_; }
  int64_t target_row(int64_t index) const;

  std::string task_;
  std::vector<std::string> classes_, feature_names_, target_names_;
  int64_t class_count_ = 0;  // 0 for regression
  int64_t rows_ = 0, window_ = 0, stride_ = 1, horizon_ = 0, samples_ = 0;
  std::vector<float> features_;  // rows_ x feature_names_.size()
  std::vector<float> targets_;   // regression: rows_ x target_names_.size()
  std::vector<int64_t> labels_;  // classification: rows_ class indices
};

// Reads `path` and builds the dataset; for a test split pass the training split's
// class_names() as `classes` and its task() as options.task.
std::shared_ptr<CsvDataset> load_csv_dataset(const std::string& path, const CsvOptions& options,
                                             const std::vector<std::string>* classes = nullptr);

}  // namespace gputrain
