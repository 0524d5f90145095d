// --dataset text: labelled texts as the token ids a text model takes by name. The texts are
// tokenized by the model's own tokenizer in tools/prepare_text.py --text-column (any Hugging
// Face tokenizer) into an .npz: input_ids int32 [N, L] padded, lengths [N], token_type_ids
// [N, L] for text pairs, labels int64 [N] (classes) or float32 [N] (regression), and a
// meta.json beside it (the class names, the tokenizer's vocabulary). Each sample is cut to its
// own length, so a batch is padded to its own longest text, not the file's:
//   input_ids i64[-1], attention_mask i64[-1] (ones), token_type_ids i64[-1] (pairs), labels.
// A file without labels (new texts, for `infer`) gives the label -100, which no loss counts (NaN
// for a regression model's).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/npy.h"
#include "data/schema.h"

namespace gputrain {

class TextDataset : public Dataset {
 public:
  int64_t size() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return {}; }
  int64_t num_classes() const override { return classes_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;
  std::shared_ptr<const SampleSchema> named_fields() const override { return schema_; }
  void get_fields(int64_t index, FieldWriter& out, uint64_t seed) const override;
  // meta.json's class names (empty for regression, or without meta.json).
  const std::vector<std::string>& class_names() const { return class_names_; }

 private:
  friend std::shared_ptr<TextDataset> load_text_dataset(const std::string&, const TextDataset*);
  std::shared_ptr<SampleSchema> schema_;  // a test split widens the training split's (longest, largest)
  NpyArray ids_, types_, labels_;
  std::vector<int32_t> lengths_;
  int64_t n_ = 0, width_ = 0, classes_ = 0;
  bool pairs_ = false, labelled_ = false, regression_ = false;
  std::vector<std::string> class_names_;
};

// Reads `path` (an .npz from tools/prepare_text.py --text-column) and the meta.json beside it.
// `train`: the training split, whose fields, label kind and classes a test split must share. A
// malformed file is a usage error naming it and the array.
std::shared_ptr<TextDataset> load_text_dataset(const std::string& path, const TextDataset* train = nullptr);

}  // namespace gputrain
