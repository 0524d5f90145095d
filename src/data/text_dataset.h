// --dataset text: labelled texts as the token ids a text model takes by name. The texts come
//   - tokenized by the model's own tokenizer in tools/prepare_text.py --text-column (any Hugging
//     Face tokenizer) into an .npz: input_ids int32 [N, L] padded, lengths [N], token_type_ids
//     [N, L] for text pairs, labels int64 [N] (classes), float32 [N] (regression) or float32
//     [N, K] (multi-label), and a meta.json beside it (the class names, the tokenizer);
//   - or as a CSV, TSV or JSONL table tokenized here by a SentencePiece model (text_table.h:
//     --text_column, --label_column, --tokenizer, --max_length), into the same arrays.
// Each sample is cut to its own length, so a batch is padded to its own longest text, not the
// file's: input_ids i64[-1], attention_mask i64[-1] (ones), token_type_ids i64[-1] (pairs),
// labels. A file without labels (new texts, for `infer`) gives the label -100, which no loss
// counts (NaN for a regression or multi-label model's).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/npy.h"
#include "data/schema.h"
#include "data/text_table.h"

namespace gputrain {

class TextDataset : public Dataset {
 public:
  int64_t size() const override { return n_; }
  std::vector<int64_t> sample_shape() const override { return {}; }
  int64_t num_classes() const override { return classes_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;
  std::shared_ptr<const SampleSchema> named_fields() const override { return schema_; }
  void get_fields(int64_t index, FieldWriter& out, uint64_t seed) const override;
  bool multilabel() const override { return multilabel_; }
  int64_t sample_length(int64_t index) const override { return lengths_[static_cast<size_t>(index)]; }
  // The class names (multi-label: the labels'; empty for regression, or an .npz without meta.json).
  const std::vector<std::string>& class_names() const { return class_names_; }
  const std::vector<std::string>* label_names() const override { return class_names_.empty() ? nullptr : &class_names_; }
  // Texts cut to --max_length, and texts with no characters (a table tokenized here).
  int64_t truncated() const { return truncated_; }
  int64_t empty_texts() const { return empty_; }

 private:
  friend std::shared_ptr<TextDataset> load_text_dataset(const std::string&, const TextDataset*, const TextTableOptions*);
  std::shared_ptr<SampleSchema> schema_;  // a test split widens the training split's (longest, largest)
  NpyArray ids_, types_, labels_;
  std::vector<int32_t> lengths_;
  int64_t n_ = 0, width_ = 0, classes_ = 0, truncated_ = 0, empty_ = 0;
  bool pairs_ = false, labelled_ = false, regression_ = false, multilabel_ = false;
  std::vector<std::string> class_names_;
  TableLabels table_labels_;  // a table's label kind, which its test split is read as
};

// Reads `path`: an .npz from tools/prepare_text.py --text-column and the meta.json beside it,
// or, with `table`, a .csv, .tsv or .jsonl file tokenized here. `train`: the training split,
// whose fields, label kind and classes a test split must share. A malformed file is a usage
// error naming it and the array or line.
std::shared_ptr<TextDataset> load_text_dataset(const std::string& path, const TextDataset* train = nullptr,
                                               const TextTableOptions* table = nullptr);

}  // namespace gputrain
