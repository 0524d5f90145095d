// Builds the train and test datasets a Config asks for: the format, the held-out split, caching,
// resizing and the transforms.
#pragma once
#include <string>

#include "config/config.h"
#include "data/dataset.h"

namespace gputrain {

struct DataSplits {
  DatasetPtr train;  // with augmentation and normalization
  DatasetPtr test;   // with normalization only (a held-out part of the training data with --val_split)
  std::string description;
  // The normalization used, as config strings: computed ones are stored in the run's config so
  // that a resume (and evaluation) reuses them instead of computing them again.
  std::string normalize_mean, normalize_std;
  // The test split is held out of the training data (--val_split): one source, whose bad
  // samples both splits report; counted once.
  bool test_held_out = false;
  int64_t bad_samples() const { return train->bad_samples() + (test_held_out ? 0 : test->bad_samples()); }
};

// Throws a usage error (naming the file and, where there is one, an install hint) when the
// data is missing or malformed.
DataSplits make_datasets(const Config& c);

// The folder a dataset is read from: --data_dir, or /usr/share/datasets/<name>, or an
// install's own copy (share/gputrain/datasets/<name>) when the system has none.
std::string dataset_dir(const Config& c);

// --dataset tokens: the tokenizer file that gives the vocabulary, --tokenizer or the
// tokenizer.json beside the first training shard ("" with --vocab_size).
std::string tokenizer_of(const Config& c);

}  // namespace gputrain
