// tokenizer.json decoding (token_decoder.h).
#include "text/token_decoder.h"

#include <cctype>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/sentencepiece.h"

namespace gputrain {
namespace {

using json = nlohmann::json;

// Code points of a UTF-8 string (the JSON parser has checked it).
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// The byte-level alphabet inverted: the character that stands for each byte -> the byte.
const std::map<uint32_t, char>& byte_level_bytes() {
  static const std::map<uint32_t, char> table = [] {
    std::map<uint32_t, char> m;
    for (unsigned b = 0; b < 256; ++b) m[byte_level_code_point(static_cast<unsigned char>(b))] = static_cast<char>(b);
    return m;
  }();
  return table;
}

std::string from_byte_level(const std::string& token) {
  std::string out;
  for (uint32_t cp : code_points(token)) {
    const auto it = byte_level_bytes().find(cp);
    if (it == byte_level_bytes().end()) return token;  // not a byte-level token: as it is
    out += it->second;
  }
  return out;
}

// "<0x0A>" -> the byte 0x0A (SentencePiece's byte fallback); anything else as it is.
std::string from_byte_fallback(const std::string& token) {
  if (token.size() == 6 && token.rfind("<0x", 0) == 0 && token.back() == '>' && std::isxdigit(token[3]) &&
      std::isxdigit(token[4]))
    return std::string(1, static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
  return token;
}

// Ids above this are no vocabulary (gputrain's --vocab_size stops there too): a file claiming
// one would have the decoder allocate a piece for every id below it.
constexpr int64_t kLargestId = int64_t{1} << 30;

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

}  // namespace

TokenDecoder TokenDecoder::load(const std::string& path) {
  if (is_sentencepiece_file(path)) {
    TokenDecoder d;
    d.sentencepiece_ = std::make_shared<const SentencePieceModel>(path);
    d.end_of_text_ = d.sentencepiece_->end_of_text();
    return d;
  }
  try {
    return read(path);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
    throw usage_error(fmt::format("tokenizer '{}' is not a tokenizer.json gputrain can read ({})", path, e.what()),
                      "give a Hugging Face tokenizer.json (--tokenizer), as tools/prepare_text.py writes one");
  }
}

nlohmann::json read_tokenizer_json(const std::string& path, const std::string& hint) {
  std::ifstream in(path);
  if (!in) throw usage_error("tokenizer '" + path + "' cannot be read", hint);
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    throw usage_error(fmt::format("tokenizer '{}' is not JSON ({})", path, e.what()), hint);
  }
}

TokenDecoder TokenDecoder::read(const std::string& path) {
  const std::string hint = "give a Hugging Face tokenizer.json (--tokenizer), as tools/prepare_text.py writes one";
  const json j = read_tokenizer_json(path, hint);
  const auto model = j.find("model");
  if (model == j.end() || !model->is_object() || !model->contains("vocab"))
    throw usage_error("tokenizer '" + path + "' has no model.vocab", hint);

  TokenDecoder d;
  // What the decoder does to each piece, in order.
  bool byte_level = false, byte_fallback = false;
  std::vector<std::pair<std::string, std::string>> replaces;
  const json decoder = j.value("decoder", json());
  const auto unsupported = [&](const std::string& type) {
    return usage_error(fmt::format("tokenizer '{}': its decoder '{}' is not one gputrain reads", path, type),
                       "a ByteLevel (GPT-2, bytes), Metaspace, WordPiece or SentencePiece-style decoder; or no "
                       "--sample_every");
  };
  const auto step = [&](const json& s) {
    const std::string type = s.value("type", "");
    if (type == "ByteLevel") {
      byte_level = true;
    } else if (type == "Metaspace") {
      replaces.emplace_back(s.value("replacement", "\u2581"), " ");
      // prepend_scheme in tokenizers 0.14 and later; add_prefix_space before.
      d.strip_first_space_ = s.contains("prepend_scheme") ? s["prepend_scheme"].get<std::string>() != "never"
                                                          : s.value("add_prefix_space", true);
    } else if (type == "Replace") {
      const auto& pattern = s.value("pattern", json::object());
      if (!pattern.contains("String")) throw unsupported("Replace with a regex");
      replaces.emplace_back(pattern["String"].get<std::string>(), s.value("content", ""));
    } else if (type == "ByteFallback") {
      byte_fallback = true;
    } else if (type == "Strip") {
      d.strip_first_space_ = s.value("start", 0) > 0;
    } else if (type == "WordPiece") {
      d.word_piece_ = true;
      d.joiner_ = " ";
    } else if (type != "Fuse") {
      throw unsupported(type);
    }
  };
  if (decoder.is_null()) {
    d.joiner_ = " ";  // no decoder: tokenizers joins the tokens with spaces
  } else if (!decoder.is_object()) {
    throw unsupported(decoder.dump().substr(0, 40));
  } else if (decoder.value("type", "") == "Sequence") {
    const json steps = decoder.value("decoders", json::array());
    if (!steps.is_array()) throw unsupported("Sequence without a list of decoders");
    for (const auto& s : steps) {
      if (!s.is_object()) throw unsupported(s.dump().substr(0, 40));
      step(s);
    }
  } else {
    step(decoder);
  }

  std::map<int64_t, std::pair<std::string, bool>> tokens;  // id -> (text, special)
  const auto& vocab = (*model)["vocab"];
  if (vocab.is_object()) {
    for (const auto& [token, id] : vocab.items())
      if (id.is_number_integer()) tokens[id.get<int64_t>()] = {token, false};
  } else if (vocab.is_array()) {  // Unigram: [piece, score] pairs, the id their position
    for (size_t i = 0; i < vocab.size(); ++i)
      if (vocab[i].is_array() && !vocab[i].empty() && vocab[i][0].is_string())
        tokens[static_cast<int64_t>(i)] = {vocab[i][0].get<std::string>(), false};
  }
  for (const auto& t : j.value("added_tokens", json::array()))
    if (t.contains("id") && t["id"].is_number_integer() && t.contains("content") && t["content"].is_string())
      tokens[t["id"].get<int64_t>()] = {t["content"].get<std::string>(), t.value("special", false)};
  if (tokens.empty() || tokens.begin()->first < 0) throw usage_error("tokenizer '" + path + "' holds no tokens", hint);
  if (tokens.rbegin()->first > kLargestId)
    throw usage_error(fmt::format("tokenizer '{}' has the token id {}, above any vocabulary", path, tokens.rbegin()->first),
                      hint);

  d.pieces_.resize(static_cast<size_t>(tokens.rbegin()->first + 1));
  d.special_.resize(d.pieces_.size());
  for (auto& [id, t] : tokens) {
    auto& [text, special] = t;
    const auto i = static_cast<size_t>(id);
    d.special_[i] = special;
    for (const char* eot : {"<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>"})
      if (text == eot && d.end_of_text_ < 0) d.end_of_text_ = id;
    if (!special) {
      if (byte_level) text = from_byte_level(text);
      for (const auto& [from, to] : replaces) replace_all(text, from, to);
      if (byte_fallback) text = from_byte_fallback(text);
    }
    d.pieces_[i] = text;
  }
  return d;
}

std::string TokenDecoder::decode(const std::vector<int64_t>& ids) const {
  return sentencepiece_ ? sentencepiece_->decode(ids) : valid_utf8(decode_bytes(ids));
}

std::string TokenDecoder::decode_bytes(const std::vector<int64_t>& ids) const {
  if (sentencepiece_) {
    // Byte pieces at the end that do not finish a character yet stay raw bytes, held back.
    size_t tail = ids.size();
    while (tail > 0 && sentencepiece_->is_byte(ids[tail - 1])) --tail;
    std::string bytes;
    for (size_t i = tail; i < ids.size(); ++i) bytes += sentencepiece_->byte_of(ids[i]);
    const size_t complete = complete_utf8_length(bytes);
    const std::vector<int64_t> settled(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(tail + complete));
    return sentencepiece_->decode(settled) + bytes.substr(complete);
  }
  std::string out;
  bool first = true;
  for (int64_t id : ids) {
    if (id < 0 || id >= static_cast<int64_t>(pieces_.size())) continue;  // a padded row: no token
    std::string piece = pieces_[static_cast<size_t>(id)];
    if (word_piece_ && !special_[static_cast<size_t>(id)] && piece.rfind("##", 0) == 0)
      piece.erase(0, 2);  // continues the word: no joiner
    else if (!first)
      out += joiner_;
    out += piece;
    first = false;
  }
  if (strip_first_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

size_t complete_utf8_length(const std::string& s) {
  // A lead byte among the last three whose sequence needs more bytes than follow it.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if (c < 0x80) return s.size();                // ASCII: complete
    if (c < 0xC0) continue;                       // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    return need > back ? s.size() - back : s.size();
  }
  return s.size();
}

std::string valid_utf8(const std::string& s) {
  // Each maximal subpart of an ill-formed sequence becomes one U+FFFD (Unicode's recommended
  // practice, which Rust's from_utf8_lossy and so tokenizers' decode follow).
  std::string out;
  const auto byte = [&](size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = byte(i);
    const int n = c < 0x80 ? 1 : (c >= 0xC2 && c < 0xE0) ? 2 : (c >= 0xE0 && c < 0xF0) ? 3 : (c >= 0xF0 && c < 0xF5) ? 4 : 0;
    // The second byte's range excludes overlong forms and surrogates.
    const unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    int k = 1;  // bytes of a well-formed prefix
    while (n > 1 && k < n) {
      const unsigned b = byte(i + static_cast<size_t>(k));
      if (i + static_cast<size_t>(k) >= s.size() || b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) break;
      ++k;
    }
    if (n == 0 || k < n) {
      out += "\xEF\xBF\xBD";
      i += static_cast<size_t>(n == 0 ? 1 : k);
      continue;
    }
    out.append(s, i, static_cast<size_t>(n));
    i += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace gputrain
