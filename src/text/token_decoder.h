// Token ids back to text through a Hugging Face tokenizer.json (its vocabulary, added tokens and
// decoder), for the texts a language model writes during training (--sample_every).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gputrain {

class SentencePieceModel;

// The JSON of tokenizer file `path`; one usage error (with `hint`) naming it when it cannot be
// read or is not JSON.
nlohmann::json read_tokenizer_json(const std::string& path, const std::string& hint);

// `s` with every byte sequence that is not UTF-8 replaced by U+FFFD.
std::string valid_utf8(const std::string& s);

class TokenDecoder {
 public:
  // Reads `path`; a file that is not a tokenizer.json, or whose decoder is not one of ByteLevel
  // (GPT-2, the bytes tokenizer), Metaspace or a SentencePiece-style Sequence (Replace,
  // ByteFallback, Fuse, Strip), WordPiece or none, is a usage error naming it. A .model is a
  // SentencePiece model (text/sentencepiece.h), decoded as its own decode does.
  static TokenDecoder load(const std::string& path);

  // The text of `ids`, as tokenizers' decode(ids, skip_special_tokens=False) writes it; bytes
  // that do not make UTF-8 (a sample cut inside a character) become U+FFFD.
  // A SentencePiece model's text is its own decode's (a broken byte sequence: one U+FFFD a byte).
  std::string decode(const std::vector<int64_t>& ids) const;
  // The same bytes before that check: a text still being written may end inside a character
  // (a SentencePiece model's: its decode of the ids before the byte pieces of that character).
  std::string decode_bytes(const std::vector<int64_t>& ids) const;

  // The end-of-text token (<|endoftext|>, </s>, <eos>...) a sample starts from; -1 when none.
  int64_t end_of_text() const { return end_of_text_; }

 private:
  static TokenDecoder read(const std::string& path);

  std::vector<std::string> pieces_;  // id -> its bytes, the decoder's mapping applied
  std::vector<bool> special_;        // added tokens: written as they are
  std::string joiner_;               // between pieces: "" (byte-level, metaspace) or " " (word-level)
  bool strip_first_space_ = false;   // Metaspace / Strip: the space the encoder put before the text
  bool word_piece_ = false;          // "##" continues the previous word
  int64_t end_of_text_ = -1;
  std::shared_ptr<const SentencePieceModel> sentencepiece_;  // a .model: it decodes, not the above
};

// The length of `s` without a character it ends in the middle of (the bytes of an unfinished
// UTF-8 sequence): what can be shown of a text that more tokens will continue.
size_t complete_utf8_length(const std::string& s);

}  // namespace gputrain
