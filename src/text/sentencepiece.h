// A SentencePiece .model (Llama 2, Mistral, Gemma, T5, and the one tools/prepare_text.py
// --train-tokenizer sentencepiece writes) through libsentencepiece, Debian's
// libsentencepiece-dev: the prompts of `gputrain generate` are encoded with it, and
// token_decoder.h writes text with it. The library is reached through
// libgputrain_sentencepiece.so (sentencepiece_shim.cpp), loaded on first use in a symbol scope
// of its own: the shim says why.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gputrain {

class SentencePieceModel {
 public:
  // Reads `path`; a file that is not a SentencePiece model is a usage error naming it, and so is
  // a build whose libgputrain_sentencepiece.so cannot be loaded.
  explicit SentencePieceModel(const std::string& path);
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  // The ids of `text`, as SentencePieceProcessor.encode(text) gives them (no BOS or EOS).
  std::vector<int64_t> encode(const std::string& text) const;
  int64_t vocab_size() const;
  int64_t end_of_text() const;    // the eos id, -1 when the model has none
  int64_t start_of_text() const;  // the bos id, -1 when the model has none
  // The id of the piece spelled `piece` ("[CLS]"), or -1 when the model has none.
  int64_t piece_id(const std::string& piece) const;
  // The text of `ids`, as SentencePieceProcessor.decode writes it (ids outside the vocabulary,
  // a padded row's, left out).
  std::string decode(const std::vector<int64_t>& ids) const;
  // Whether `id` is a byte piece (<0xAB>, byte fallback), and that byte.
  bool is_byte(int64_t id) const;
  char byte_of(int64_t id) const;

 private:
  void* model_ = nullptr;  // the shim's handle
  int64_t size_ = 0;
};

// Whether `path` names a SentencePiece model (its extension is .model).
bool is_sentencepiece_file(const std::string& path);

}  // namespace gputrain
