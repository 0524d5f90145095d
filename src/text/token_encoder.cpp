// tokenizer.json encoding for byte-level BPE (token_encoder.h). The pre-tokenizers' regexes use
// Unicode letter and number classes (\p{L}, \p{N}): PCRE2 with Unicode properties matches them,
// as the Oniguruma regexes of Hugging Face's tokenizers do.
#include "text/token_encoder.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/sentencepiece.h"
#include "text/token_decoder.h"

namespace gputrain {
namespace {

using json = nlohmann::json;

// GPT-2's split, which a ByteLevel pre-tokenizer with use_regex applies: contractions, letters,
// numbers, other symbols (each with one space before it), and runs of spaces.
constexpr const char* kGpt2Split = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

}  // namespace

const std::string& byte_level_char(unsigned char b) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t;
    for (unsigned c = 0; c < 256; ++c) t.push_back(utf8(byte_level_code_point(static_cast<unsigned char>(c))));
    return t;
  }();
  return table[b];
}

// One compiled split regex (the pre-tokenizer's, Isolated: matches and the gaps between them
// are pieces of their own).
struct TokenEncoder::Regex {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  ~Regex() {
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }

  std::vector<std::string> split(const std::string& s) const {
    std::vector<std::string> pieces;
    size_t at = 0, gap = 0;
    while (at <= s.size()) {
      const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at, 0, match, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
      if (ov[1] == ov[0]) {  // an empty match: step over one character
        at = ov[0] + 1;
        while (at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) ++at;
        continue;
      }
      if (ov[0] > gap) pieces.push_back(s.substr(gap, ov[0] - gap));
      pieces.push_back(s.substr(ov[0], ov[1] - ov[0]));
      at = gap = ov[1];
    }
    if (gap < s.size()) pieces.push_back(s.substr(gap));
    return pieces;
  }
};

TokenEncoder::TokenEncoder() = default;
TokenEncoder::TokenEncoder(TokenEncoder&&) noexcept = default;
TokenEncoder& TokenEncoder::operator=(TokenEncoder&&) noexcept = default;
TokenEncoder::~TokenEncoder() = default;

TokenEncoder TokenEncoder::load(const std::string& path) {
  if (is_sentencepiece_file(path)) {
    TokenEncoder e;
    e.sentencepiece_ = std::make_shared<const SentencePieceModel>(path);
    return e;
  }
  const std::string hint = "give the prompt as ids (--prompt_ids 1,2,3), or a byte-level BPE tokenizer.json";
  const json j = read_tokenizer_json(path, hint);
  const auto refuse = [&](const std::string& what) {
    return usage_error(fmt::format("tokenizer '{}': {}: gputrain encodes byte-level BPE only", path, what), hint);
  };
  try {
    const json model = j.value("model", json::object());
    if (model.value("type", "") != "BPE" || !model.contains("vocab")) throw refuse("its model is not BPE");
    if (!j.value("normalizer", json()).is_null()) throw refuse("it has a normalizer");
    TokenEncoder e;
    const auto add_regex = [&](const std::string& pattern) {
      auto r = std::make_unique<Regex>();
      int error = 0;
      PCRE2_SIZE offset = 0;
      r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                              &error, &offset, nullptr);
      if (!r->code) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof message);
        throw refuse(fmt::format("its split regex does not compile at offset {} ({})", offset,
                                 reinterpret_cast<const char*>(message)));
      }
      r->match = pcre2_match_data_create_from_pattern(r->code, nullptr);
      e.splits_.push_back(std::move(r));
    };
    bool byte_level = false;
    const auto step = [&](const json& p) {
      const std::string type = p.value("type", "");
      if (type == "ByteLevel") {
        byte_level = true;
        e.add_prefix_space_ = p.value("add_prefix_space", false);
        if (p.value("use_regex", true)) add_regex(kGpt2Split);
      } else if (type == "Split" && p.value("behavior", "") == "Isolated" && !p.value("invert", false) &&
                 p.value("pattern", json::object()).contains("Regex")) {
        add_regex(p["pattern"]["Regex"].get<std::string>());
      } else {
        throw refuse(fmt::format("its pre-tokenizer '{}'{} is not one it reads", type,
                                 type == "Split" ? " (other than an Isolated regex)" : ""));
      }
    };
    const json pre = j.value("pre_tokenizer", json());
    if (pre.value("type", "") == "Sequence")
      for (const auto& p : pre.value("pretokenizers", json::array())) step(p);
    else if (!pre.is_null())
      step(pre);
    if (!byte_level) throw refuse("it has no ByteLevel pre-tokenizer");
    e.ignore_merges_ = model.value("ignore_merges", false);
    const auto checked = [&](int64_t id) {
      if (id < 0 || id >= (int64_t{1} << 30)) throw refuse(fmt::format("its id {} is no token id", id));
      return id;
    };
    for (const auto& [token, id] : model["vocab"].items()) e.vocab_[token] = checked(id.get<int64_t>());
    int64_t rank = 0;
    for (const auto& m : model.value("merges", json::array()))  // "a b", or ["a", "b"] (tokenizers 0.20)
      e.ranks_.emplace(m.is_string() ? m.get<std::string>()
                                     : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>(),
                       rank++);
    for (const auto& t : j.value("added_tokens", json::array()))
      e.added_.emplace_back(t.at("content").get<std::string>(), checked(t.at("id").get<int64_t>()));
    std::stable_sort(e.added_.begin(), e.added_.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    return e;
  } catch (const json::exception& x) {  // a field of the wrong type
    throw usage_error(fmt::format("tokenizer '{}' is not a tokenizer.json gputrain can read ({})", path, x.what()), hint);
  }
}

std::vector<int64_t> TokenEncoder::encode(const std::string& text) const {
  if (valid_utf8(text) != text) throw usage_error("the prompt is not UTF-8 text", "give UTF-8 text, or --prompt_ids");
  if (sentencepiece_) return sentencepiece_->encode(text);
  std::vector<int64_t> out;
  // Added tokens (<|endoftext|>) are matched in the text first, the longest at each place.
  size_t piece = 0;
  for (size_t at = 0; at < text.size();) {
    const auto added = std::find_if(added_.begin(), added_.end(), [&](const auto& a) {
      return !a.first.empty() && text.compare(at, a.first.size(), a.first) == 0;
    });
    if (added == added_.end()) {
      ++at;
      continue;
    }
    encode_piece(text.substr(piece, at - piece), out);
    out.push_back(added->second);
    piece = at = at + added->first.size();
  }
  encode_piece(text.substr(piece), out);
  return out;
}

void TokenEncoder::encode_piece(const std::string& bytes, std::vector<int64_t>& out) const {
  if (bytes.empty()) return;
  std::vector<std::string> pieces{add_prefix_space_ && bytes[0] != ' ' ? " " + bytes : bytes};
  for (const auto& regex : splits_) {
    std::vector<std::string> finer;
    for (const auto& p : pieces)
      for (auto& q : regex->split(p)) finer.push_back(std::move(q));
    pieces = std::move(finer);
  }
  for (const auto& p : pieces) {
    std::string chars;
    for (char c : p) chars += byte_level_char(static_cast<unsigned char>(c));
    encode_word(chars, out);
  }
}

void TokenEncoder::encode_word(const std::string& chars, std::vector<int64_t>& out) const {
  if (ignore_merges_) {
    if (const auto it = vocab_.find(chars); it != vocab_.end()) return out.push_back(it->second);
  }
  // Symbols start as characters; the adjacent pair of the lowest merge rank (the leftmost of
  // equals) is merged until no pair has a rank, as tokenizers' BPE merges.
  std::vector<std::string> symbols;
  for (size_t i = 0; i < chars.size();) {
    const auto c = static_cast<unsigned char>(chars[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    symbols.push_back(chars.substr(i, n));
    i += n;
  }
  while (symbols.size() > 1) {
    int64_t best = std::numeric_limits<int64_t>::max();
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i)
      if (const auto it = ranks_.find(symbols[i] + " " + symbols[i + 1]); it != ranks_.end() && it->second < best)
        best = it->second, at = i;
    if (best == std::numeric_limits<int64_t>::max()) break;
    symbols[at] += symbols[at + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  for (const auto& s : symbols) {
    const auto it = vocab_.find(s);
    if (it == vocab_.end())
      throw usage_error(fmt::format("the tokenizer has no id for the piece '{}' of the prompt", s),
                        "a byte-level vocabulary holds every byte; give --prompt_ids for this tokenizer");
    out.push_back(it->second);
  }
}

}  // namespace gputrain
