// What a run was trained on, as config.json and every checkpoint record it: the sample counts and,
// for each data file the flags name, its size, modification time and a CRC-32 of its first and
// last MiB (a file of any size is fingerprinted in milliseconds). A resume compares them.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace gputrain {

// {"train_samples", "test_samples", "files": {path: {"bytes", "mtime", "crc32_ends"}}}. The files:
// --train_file, --test_file, --train_targets, --test_targets, the regular files directly in
// --data_dir (up to 64: MNIST's four, CIFAR's batches, a few shards; a folder of images is
// counted in samples, not fingerprinted file by file), and --dataset text's --tokenizer (a table
// is tokenized at load): its folder's files, or the .model and the configs beside it.
nlohmann::json data_fingerprint(const Config& c, int64_t train_samples, int64_t test_samples);

}  // namespace gputrain
