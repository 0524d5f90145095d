// --dataset text: the arrays stay in the .npz's mapping; a sample's row is read and widened to
// int64 when the loader asks for it.
#include "data/text_dataset.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"

namespace gputrain {
namespace {

constexpr const char* kHint =
    "make it with tools/prepare_text.py TEXTS.csv --text-column text --label-column label --tokenizer MODEL_DIR "
    "--out DIR (README: \"Fine-tune a text classifier\")";

constexpr int64_t kNoLabel = -100;  // cross-entropy's ignore index: a text without a label

// Element i of an integer array, whatever its width.
int64_t integer_at(const NpyArray& a, int64_t i) { return static_cast<int64_t>(a.at(i)); }

}  // namespace

int64_t TextDataset::get(int64_t, float*, float*, uint64_t) const {
  throw std::logic_error("TextDataset::get: a dataset of named fields is read with get_fields");
}

void TextDataset::get_fields(int64_t index, FieldWriter& out, uint64_t) const {
  const int64_t length = lengths_[static_cast<size_t>(index)], first = index * width_;
  size_t f = 0;
  auto* ids = static_cast<int64_t*>(out.field(f++, length));
  for (int64_t t = 0; t < length; ++t) ids[t] = integer_at(ids_, first + t);
  auto* mask = static_cast<int64_t*>(out.field(f++, length));
  std::fill(mask, mask + length, int64_t{1});
  if (pairs_) {
    auto* types = static_cast<int64_t*>(out.field(f++, length));
    for (int64_t t = 0; t < length; ++t) types[t] = integer_at(types_, first + t);
  }
  void* label = out.field(f, 0);
  if (multilabel_) {  // K labels of 0 or 1; a text without them: NaN, nothing to compare with
    auto* values = static_cast<float*>(label);
    for (int64_t k = 0; k < classes_; ++k)
      values[k] = labelled_ ? static_cast<float>(labels_.at(index * classes_ + k)) : std::numeric_limits<float>::quiet_NaN();
  } else if (regression_) {
    *static_cast<float*>(label) = labelled_ ? static_cast<float>(labels_.at(index)) : std::numeric_limits<float>::quiet_NaN();
  } else {
    *static_cast<int64_t*>(label) = labelled_ ? integer_at(labels_, index) : kNoLabel;
  }
}

std::shared_ptr<TextDataset> load_text_dataset(const std::string& path, const TextDataset* train,
                                               const TextTableOptions* table) {
  auto data = std::shared_ptr<TextDataset>(new TextDataset());
  TextDataset& d = *data;
  const bool npz = path.size() >= 4 && path.compare(path.size() - 4, 4, ".npz") == 0;
  std::map<std::string, NpyArray> arrays;
  if (npz) {
    if (table && (!table->text_columns.empty() || !table->label_columns.empty()))
      throw usage_error(path + ": --text_column and --label_column name a table's columns; an .npz holds tokenized texts",
                        "drop them, or give the .csv, .tsv or .jsonl file");
    arrays = read_npz(path, {"input_ids", "lengths", "token_type_ids", "labels"});
  } else if (is_text_table(path)) {
    if (!table || table->text_columns.empty())
      throw usage_error(path + ": a table of texts needs --text_column (and --label_column for its labels)",
                        "e.g. --text_column text --label_column label --tokenizer MODEL_DIR/spm.model");
    TokenizedTable t = tokenize_table(path, *table, train ? &train->table_labels_ : nullptr);
    arrays = std::move(t.arrays);
    d.table_labels_ = t.labels;
    d.truncated_ = t.truncated;
    d.empty_ = t.empty;
    if (t.labels.kind != "regression") d.class_names_ = t.labels.classes;
  } else {
    throw usage_error(path + ": --dataset text reads a table of texts (.csv, .tsv, .jsonl) or the .npz of tokenized "
                             "texts tools/prepare_text.py writes",
                      kHint);
  }
  auto need = [&](const char* name) -> NpyArray& {
    const auto it = arrays.find(name);
    if (it == arrays.end()) throw usage_error(fmt::format("{}: no '{}' array: not tokenized texts", path, name), kHint);
    return it->second;
  };
  d.ids_ = need("input_ids");
  const NpyArray& lengths = need("lengths");
  if (d.ids_.shape.size() != 2 || !d.ids_.is_integer() || d.ids_.shape[0] < 1 || d.ids_.shape[1] < 1)
    throw usage_error(fmt::format("{}: input_ids is {} [{}], not integers [texts, tokens]", path, npy_dtype_name(d.ids_.dtype),
                                  fmt::join(d.ids_.shape, ", ")),
                      kHint);
  d.n_ = d.ids_.shape[0];
  d.width_ = d.ids_.shape[1];
  if (lengths.shape != std::vector<int64_t>{d.n_} || !lengths.is_integer())
    throw usage_error(fmt::format("{}: lengths is [{}], not one integer per text ({})", path, fmt::join(lengths.shape, ", "), d.n_),
                      kHint);
  int64_t largest = -1;
  for (int64_t i = 0; i < d.n_; ++i) {
    const int64_t n = integer_at(lengths, i);
    if (n < 1 || n > d.width_)
      throw usage_error(fmt::format("{}: text {} has length {}, outside 1..{}", path, i, n, d.width_), kHint);
    d.lengths_.push_back(static_cast<int32_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const int64_t id = integer_at(d.ids_, i * d.width_ + t);
      if (id < 0) throw usage_error(fmt::format("{}: text {} holds the token id {}", path, i, id), kHint);
      largest = std::max(largest, id);
    }
  }
  if (const auto it = arrays.find("token_type_ids"); it != arrays.end()) {
    if (it->second.shape != d.ids_.shape || !it->second.is_integer())
      throw usage_error(path + ": token_type_ids does not match input_ids' shape", kHint);
    d.types_ = it->second;
    d.pairs_ = true;
  }
  if (const auto it = arrays.find("labels"); it != arrays.end()) {
    const auto& shape = it->second.shape;
    d.multilabel_ = shape.size() == 2 && shape[0] == d.n_ && shape[1] >= 1 && !it->second.is_integer();
    if (shape != std::vector<int64_t>{d.n_} && !d.multilabel_)
      throw usage_error(fmt::format("{}: labels is {} [{}], not one per text ({}), nor floats [texts, labels] (multi-label)",
                                    path, npy_dtype_name(it->second.dtype), fmt::join(shape, ", "), d.n_),
                        kHint);
    d.labels_ = it->second;
    d.labelled_ = true;
    d.regression_ = !d.multilabel_ && !d.labels_.is_integer();
    if (d.multilabel_) {
      d.classes_ = shape[1];
      for (int64_t i = 0; i < d.labels_.numel; ++i)
        if (const double v = d.labels_.at(i); v != 0 && v != 1)
          throw usage_error(fmt::format("{}: text {} has the multi-label value {}; each label is 0 or 1", path, i / d.classes_, v),
                            kHint);
    }
  }

  // meta.json beside an .npz: the class names (a split may lack the last class), and whether
  // its labels are several per text.
  const auto meta_path = std::filesystem::path(path).parent_path() / "meta.json";
  if (std::ifstream in(meta_path); npz && in) {
    const auto meta = nlohmann::json::parse(in, nullptr, false);
    if (!meta.is_object()) throw usage_error(meta_path.string() + ": not JSON", kHint);
    if (meta.contains("classes") && meta["classes"].is_array())
      for (const auto& c : meta["classes"]) d.class_names_.push_back(c.is_string() ? c.get<std::string>() : c.dump());
    if (!d.labelled_ && meta.value("labels", std::string()) == "multilabel") {  // new texts for a multi-label model
      d.multilabel_ = true;
      d.classes_ = static_cast<int64_t>(d.class_names_.size());
    }
  }
  if (train) {
    if (!d.labelled_) {  // new texts, read as the training data's kind
      d.regression_ = train->regression_;
      d.multilabel_ = train->multilabel_;
    }
    if (train->pairs_ != d.pairs_ || train->regression_ != d.regression_ || train->multilabel_ != d.multilabel_)
      throw usage_error(path + ": its texts or labels are not of the training data's kind (pairs; classes, several labels "
                               "or regression)",
                        "tokenize both splits alike (one run of tools/prepare_text.py, or the same --text_column and "
                        "--label_column)");
    if (!d.class_names_.empty() && !train->class_names_.empty() && d.class_names_ != train->class_names_)
      throw usage_error(path + ": its classes (" + join(d.class_names_, ", ") + ") are not the training data's (" +
                            join(train->class_names_, ", ") + ")",
                        "tokenize both splits in one run of tools/prepare_text.py (--test FILE)");
  }
  if (d.multilabel_) {
    if (train) {
      if (train->classes_ != d.classes_ && d.labelled_)
        throw usage_error(fmt::format("{}: {} labels per text, the training data has {}", path, d.classes_, train->classes_),
                          "tokenize both splits alike");
      d.classes_ = train->classes_;
    }
  } else if (!d.regression_) {
    int64_t top = -1;
    for (int64_t i = 0; d.labelled_ && i < d.n_; ++i) {
      const int64_t label = integer_at(d.labels_, i);
      if (label < 0) throw usage_error(fmt::format("{}: text {} has the label {}; classes are 0 or more", path, i, label), kHint);
      top = std::max(top, label);
    }
    d.classes_ = train ? train->classes_ : std::max<int64_t>(top + 1, static_cast<int64_t>(d.class_names_.size()));
    if (d.classes_ < 1) throw usage_error(path + ": no labels, and no classes in its meta.json, to train on", kHint);
    if (top >= d.classes_)
      throw usage_error(fmt::format("{}: label {} is outside the {} classes of the training data", path, top, d.classes_),
                        "tokenize both splits in one run of tools/prepare_text.py (--test FILE)");
  }

  d.schema_ = std::make_shared<SampleSchema>();
  SampleSchema& s = *d.schema_;
  s.target = "labels";
  // One layout for both splits, as the model is bound to the training split's: the longer
  // longest, the larger largest id, in both.
  int64_t longest = *std::max_element(d.lengths_.begin(), d.lengths_.end());
  if (train) {
    longest = std::max(longest, train->schema_->fields.front().longest);
    largest = std::max(largest, train->schema_->fields.front().largest);
    for (auto& f : train->schema_->fields)
      if (f.varies()) f.longest = longest;
    train->schema_->fields.front().largest = largest;
  }
  auto tokens = [&](const char* name) {
    TensorField f{name, DType::kI64, {-1}, 0, longest};
    return f;
  };
  s.fields.push_back(tokens("input_ids"));
  s.fields.back().largest = largest;
  s.fields.push_back(tokens("attention_mask"));
  if (d.pairs_) s.fields.push_back(tokens("token_type_ids"));
  if (d.multilabel_)
    s.fields.push_back(TensorField{"labels", DType::kF32, {d.classes_}, 0});
  else
    s.fields.push_back(TensorField{"labels", d.regression_ ? DType::kF32 : DType::kI64, {}, 0});
  return data;
}

}  // namespace gputrain
