// --dataset jsonl: samples of named fields, one JSON object per line, as tokenized text is kept
// ({"input_ids": [...], "attention_mask": [...], "labels": [...]}; Hugging Face datasets write
// it with to_json). Each key is a field: integers are i64, numbers with a fraction f32; a list
// is one row per element, of varying size when the lines' lists differ in length (padded per
// batch). The target is --target, else "labels", "label" or "y", whichever the lines have; its
// padding is -100, which the loss ignores, every other field's is 0.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/schema.h"

namespace gputrain {

class JsonlDataset : public Dataset {
 public:
  int64_t size() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return {}; }
  int64_t num_classes() const override { return classes_; }
  std::vector<int64_t> target_shape() const override;
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;
  std::shared_ptr<const SampleSchema> named_fields() const override { return schema_; }
  void get_fields(int64_t index, FieldWriter& out, uint64_t seed) const override;

 private:
  friend std::shared_ptr<JsonlDataset> load_jsonl_dataset(const std::string&, const std::string&, int64_t,
                                                          JsonlDataset*);
  struct Column {
    std::vector<int64_t> ints;  // an i64 field's values, samples one after another
    std::vector<float> floats;  // an f32 field's
    std::vector<int64_t> start;  // sample i's values are [start[i], start[i + 1])
  };
  std::shared_ptr<SampleSchema> schema_;
  std::vector<Column> columns_;
  int64_t n_ = 0, classes_ = 0;
};

// Reads `path`. `target`: the target field's name ("" = labels, label or y). `classes`: the
// classes of an i64 target (0 = its largest value + 1). `train`: the training split, whose
// fields, dtypes, fixed shapes and classes a test split must share; both then get one layout (a
// list varying in either varies in both, with the longer longest). A usage error names the file
// and line for anything malformed.
std::shared_ptr<JsonlDataset> load_jsonl_dataset(const std::string& path, const std::string& target, int64_t classes,
                                                 JsonlDataset* train = nullptr);

}  // namespace gputrain
