// Text to token ids through a Hugging Face tokenizer.json with a byte-level BPE model (GPT-2,
// RoBERTa, Llama 3, Qwen, the bytes tokenizer of tools/prepare_text.py), for the prompts of
// `gputrain generate`.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace gputrain {

class SentencePieceModel;

class TokenEncoder {
 public:
  // Reads `path`. A file that is not a tokenizer.json, or whose model is not BPE over bytes
  // (pre-tokenizer ByteLevel, or a Sequence of regex Splits and a ByteLevel without its own
  // regex), or that has a normalizer, is a usage error naming it. A .model is a SentencePiece
  // model, which encodes through libsentencepiece (text/sentencepiece.h).
  static TokenEncoder load(const std::string& path);

  // The ids of `text`, as tokenizers' encode(text, add_special_tokens=False).ids: added tokens
  // written in the text are matched first, then each piece is split by the pre-tokenizer's
  // regex, mapped to byte-level characters and merged by BPE.
  std::vector<int64_t> encode(const std::string& text) const;

  TokenEncoder(TokenEncoder&&) noexcept;
  TokenEncoder& operator=(TokenEncoder&&) noexcept;
  ~TokenEncoder();

 private:
  TokenEncoder();
  void encode_piece(const std::string& bytes, std::vector<int64_t>& out) const;
  void encode_word(const std::string& chars, std::vector<int64_t>& out) const;

  struct Regex;
  std::vector<std::unique_ptr<Regex>> splits_;      // applied in order: each splits every piece further
  std::unordered_map<std::string, int64_t> vocab_;  // byte-level characters -> id
  std::unordered_map<std::string, int64_t> ranks_;  // "left right" -> merge rank (lower merges first)
  std::vector<std::pair<std::string, int64_t>> added_;  // literal added tokens, longest first
  bool add_prefix_space_ = false;
  bool ignore_merges_ = false;  // Llama 3: a word in the vocabulary is one token, whatever the merges
  std::shared_ptr<const SentencePieceModel> sentencepiece_;  // a .model: it encodes, not the above
};

// The byte-level alphabet of GPT-2: byte b as the UTF-8 of a printable code point.
const std::string& byte_level_char(unsigned char b);

}  // namespace gputrain
