// --dataset tokens: a language model's data, token files cut into windows. Sample i is window i
// of --seq_len + 1 tokens: its first seq_len are `input_ids`, its last seq_len (shifted by one)
// are `labels`, the target. Windows do not overlap and do not cross a file's end (llm.c's and
// nanoGPT's loaders read the same way). The loader shuffles the windows each epoch and gives
// each rank its own; an evaluation reads them in order.
//
// Packed instruction data (tools/prepare_text.py --instructions) has a mask beside each shard
// (X.mask.npy, uint8 per token: 1 = a token the loss trains on) and whole examples behind
// end-of-text tokens in windows of exactly --seq_len. Its labels are -100 where the mask is 0,
// and a third field, `positions`, restarts at 0 at each end-of-text token: the models start
// their positions there and attend within each example only (models/documents.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/schema.h"
#include "data/token_shard.h"

namespace gputrain {

class TokenDataset : public Dataset {
 public:
  // `files`: the shards, in order. `vocab`: the tokenizer's vocabulary (ids must be below it).
  // `max_windows` > 0 keeps the first ones only (--eval_tokens). Exit 2 naming the file for a
  // bad shard, too few tokens for one window, or an id outside the vocabulary (each shard is
  // scanned once here).
  // `packed_eot` >= 0: packed data whose examples start with that token (the masks are read).
  TokenDataset(const std::vector<std::string>& files, int64_t seq_len, int64_t vocab, int64_t max_windows = 0,
               int64_t packed_eot = -1);

  int64_t size() const override { return windows_; }
  std::vector<int64_t> sample_shape() const override { return {}; }
  int64_t num_classes() const override { return vocab_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;
  std::shared_ptr<const SampleSchema> named_fields() const override { return schema_; }
  void get_fields(int64_t index, FieldWriter& out, uint64_t seed) const override;

  const std::vector<TokenShard>& shards() const { return shards_; }
  int64_t tokens() const;  // in every shard
  int64_t seq_len() const { return seq_len_; }
  bool packed() const { return packed_eot_ >= 0; }

 private:
  std::vector<TokenShard> shards_;
  std::vector<TokenShard> masks_;  // packed data: one per shard
  std::vector<int64_t> first_window_;  // shard s holds windows [first_window_[s], first_window_[s + 1])
  int64_t seq_len_, vocab_, packed_eot_, windows_ = 0;
  std::shared_ptr<SampleSchema> schema_;
};

// The vocabulary size a tokenizer file declares: a Hugging Face tokenizer.json (its model's
// vocabulary and added tokens: the largest id + 1), or a SentencePiece .model (its pieces). Exit
// 2 naming the file when it is not one.
int64_t tokenizer_vocab_size(const std::string& path);

}  // namespace gputrain
