// --dataset tokens (token_dataset.h): shards -> windows -> input_ids and labels.
#include "data/token_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/sentencepiece.h"

namespace gputrain {

namespace {

// The mask beside a packed shard: X.bin -> X.mask.npy, one value per token, and windows that
// are whole examples only when --seq_len is the length they were packed for (checked by the
// caller from meta.json; here, that the mask fits the shard).
TokenShard open_mask(const TokenShard& tokens, int64_t seq_len) {
  std::string path = tokens.path;
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0) path.resize(path.size() - 4);
  path += ".mask.npy";
  if (!std::filesystem::exists(path))
    throw usage_error(fmt::format("{}: packed instruction data without its loss mask ({})", tokens.path, path),
                      "write the shards again with tools/prepare_text.py --instructions");
  TokenShard mask = open_token_shard(path);
  if (mask.count != tokens.count || (tokens.count - 1) % seq_len != 0)
    throw usage_error(fmt::format("{}: {} mask values for {} tokens in windows of {}", path, mask.count, tokens.count,
                                  seq_len),
                      "write the shards again with tools/prepare_text.py --instructions");
  return mask;
}

}  // namespace

TokenDataset::TokenDataset(const std::vector<std::string>& files, int64_t seq_len, int64_t vocab, int64_t max_windows,
                           int64_t packed_eot)
    : seq_len_(seq_len), vocab_(vocab), packed_eot_(packed_eot) {
  first_window_.push_back(0);
  for (const auto& path : files) {
    TokenShard s = open_token_shard(path);
    if (s.count == 0)
      throw usage_error(path + ": holds no tokens", "a shard holds at least one window of --seq_len + 1 tokens; "
                                                    "remove the empty file or write it again (tools/prepare_text.py)");
    // Every id checked once, here, so that a bad one stops the run before anything is written
    // rather than in a loader thread hours in. The scan reads the shard from the page cache
    // that training reads next (about 1 s per GB).
    const auto [largest, where] = s.max_token();
    if (largest >= vocab || largest < 0)
      throw usage_error(fmt::format("{}: token {} at position {} is outside the vocabulary of {}", path, largest, where,
                                    vocab),
                        "give the tokenizer the shards were written with (--tokenizer), or --vocab_size above "
                        "their largest id");
    // A window reads seq_len + 1 tokens and the next starts seq_len on: a window's last label is
    // the next one's first input, as llm.c's and nanoGPT's loaders read.
    const int64_t windows = s.count > seq_len ? (s.count - 1) / seq_len : 0;
    if (packed_eot >= 0) masks_.push_back(open_mask(s, seq_len));
    first_window_.push_back(first_window_.back() + windows);
    shards_.push_back(std::move(s));
  }
  windows_ = first_window_.back();
  if (windows_ == 0)
    throw usage_error(fmt::format("{}: {} tokens in all, fewer than one window of --seq_len {} + 1", files.front(),
                                  tokens(), seq_len),
                      "a shorter --seq_len, or more text");
  if (max_windows > 0) windows_ = std::min(windows_, max_windows);
  schema_ = std::make_shared<SampleSchema>();
  schema_->fields = {{"input_ids", DType::kI64, {seq_len}}, {"labels", DType::kI64, {seq_len}}};
  if (packed_eot >= 0) schema_->fields.push_back({"positions", DType::kI64, {seq_len}});
  schema_->target = "labels";
}

int64_t TokenDataset::tokens() const {
  int64_t n = 0;
  for (const auto& s : shards_) n += s.count;
  return n;
}

int64_t TokenDataset::get(int64_t, float*, float*, uint64_t) const {
  throw std::logic_error("TokenDataset::get: token windows are read with get_fields");
}

void TokenDataset::get_fields(int64_t index, FieldWriter& out, uint64_t) const {
  const auto shard = static_cast<size_t>(std::upper_bound(first_window_.begin(), first_window_.end(), index) -
                                         first_window_.begin() - 1);
  const int64_t first = (index - first_window_[shard]) * seq_len_;
  auto* ids = static_cast<int64_t*>(out.field(0));
  auto* labels = static_cast<int64_t*>(out.field(1));
  shards_[shard].read(first, seq_len_, ids);
  // The labels are the same tokens one on: the one past the window's inputs, read once.
  std::copy(ids + 1, ids + seq_len_, labels);
  shards_[shard].read(first + seq_len_, 1, labels + seq_len_ - 1);
  if (packed_eot_ < 0) return;
  // Only the tokens the mask marks are trained on: -100 is cross-entropy's ignore index.
  std::vector<int64_t> mask(static_cast<size_t>(seq_len_));
  masks_[shard].read(first + 1, seq_len_, mask.data());
  for (int64_t i = 0; i < seq_len_; ++i)
    if (mask[static_cast<size_t>(i)] == 0) labels[i] = -100;
  // Each example's positions count from its end-of-text token; the window starts with one.
  auto* positions = static_cast<int64_t*>(out.field(2));
  for (int64_t i = 0; i < seq_len_; ++i) positions[i] = i == 0 || ids[i] == packed_eot_ ? 0 : positions[i - 1] + 1;
}

int64_t tokenizer_vocab_size(const std::string& path) {
  if (is_sentencepiece_file(path)) return SentencePieceModel(path).vocab_size();
  std::ifstream in(path);
  if (!in) throw usage_error("tokenizer '" + path + "' cannot be read", "give a Hugging Face tokenizer.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw usage_error(fmt::format("tokenizer '{}' is not JSON ({})", path, e.what()),
                      "give a Hugging Face tokenizer.json (tokenizers' Tokenizer.save writes one)");
  }
  int64_t size = 0;
  const auto model = j.find("model");
  if (model == j.end() || !model->is_object() || !model->contains("vocab"))
    throw usage_error("tokenizer '" + path + "' has no model.vocab", "give a Hugging Face tokenizer.json");
  const auto& vocab = model->at("vocab");
  if (vocab.is_object()) {  // BPE, WordPiece: token -> id
    for (const auto& [token, id] : vocab.items())
      if (id.is_number_integer()) size = std::max<int64_t>(size, id.get<int64_t>() + 1);
  } else if (vocab.is_array()) {  // Unigram: [token, score] pairs, the id their position
    size = static_cast<int64_t>(vocab.size());
  }
  if (const auto added = j.find("added_tokens"); added != j.end() && added->is_array())
    for (const auto& t : *added)
      if (t.contains("id") && t["id"].is_number_integer()) size = std::max<int64_t>(size, t["id"].get<int64_t>() + 1);
  if (size <= 0) throw usage_error("tokenizer '" + path + "' holds no tokens", "give a Hugging Face tokenizer.json");
  return size;
}

}  // namespace gputrain
