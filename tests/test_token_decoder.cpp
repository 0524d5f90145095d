// Token ids back to text through tokenizer.json decoders (text/token_decoder.h), and the UTF-8
// repair of a sample cut inside a character.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "core/error.h"
#include "test_python.h"
#include "test_util.h"
#include "text/token_decoder.h"

using namespace gputrain;

namespace {

TokenDecoder decoder(const test::TempDir& dir, const std::string& json) {
  const std::string path = dir / "tokenizer.json";
  std::ofstream(path) << json;
  return TokenDecoder::load(path);
}

}  // namespace

TEST_CASE("token decoder: ByteLevel maps GPT-2's stand-in characters back to bytes", "[text]") {
  test::TempDir dir;
  // "Ġ" (U+0120) stands for the space, "Ċ" (U+010A) for the newline; "é" is two bytes, each its
  // own Latin-1 stand-in ("Ã" U+00C3, "©" U+00A9).
  const auto d = decoder(dir, R"({"model": {"vocab": {"Hi": 0, "Ġthere": 1, "Ċ": 2, "Ã": 3, "©": 4}},
    "added_tokens": [{"id": 5, "content": "<|endoftext|>", "special": true}],
    "decoder": {"type": "ByteLevel"}})");
  CHECK(d.decode({0, 1, 2}) == "Hi there\n");
  CHECK(d.decode({3, 4}) == "\xC3\xA9");
  CHECK(d.decode({5, 0}) == "<|endoftext|>Hi");  // special tokens written as they are
  CHECK(d.end_of_text() == 5);
  CHECK(d.decode({3}) == "\xEF\xBF\xBD");  // half a character
  CHECK(d.decode({0, 99, 1}) == "Hi there");  // an id past the vocabulary (a padded row) is no token
}

TEST_CASE("token decoder: Metaspace, a SentencePiece-style sequence, WordPiece and none", "[text]") {
  test::TempDir dir;
  const auto meta = decoder(dir, R"({"model": {"vocab": [["<unk>", 0], ["▁Hello", -1], ["▁world", -2], ["!", -3]]},
    "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"}})");
  CHECK(meta.decode({1, 2, 3}) == "Hello world!");
  CHECK(meta.end_of_text() == -1);
  // Before tokenizers 0.14: add_prefix_space; false put no space before the text, so none is cut.
  const auto legacy = decoder(dir, R"({"model": {"vocab": [["<unk>", 0], ["▁Hello", -1]]},
    "decoder": {"type": "Metaspace", "replacement": "▁", "add_prefix_space": false}})");
  CHECK(legacy.decode({1}) == " Hello");

  const auto spm = decoder(dir, R"({"model": {"vocab": {"<s>": 0, "</s>": 1, "▁a": 2, "<0x0A>": 3, "b": 4}},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}})");
  CHECK(spm.decode({2, 3, 4}) == "a\nb");
  CHECK(spm.end_of_text() == 1);

  const auto wp = decoder(dir, R"({"model": {"vocab": {"[SEP]": 0, "play": 1, "##ing": 2, "now": 3}},
    "decoder": {"type": "WordPiece", "prefix": "##"}})");
  CHECK(wp.decode({1, 2, 3}) == "playing now");

  const auto none = decoder(dir, R"({"model": {"vocab": {"a": 0, "b": 1}}})");
  CHECK(none.decode({0, 1}) == "a b");
}

TEST_CASE("token decoder: a decoder it cannot read, or no tokenizer, is a usage error naming the file", "[text]") {
  test::TempDir dir;
  try {
    decoder(dir, R"({"model": {"vocab": {"a": 0}}, "decoder": {"type": "CTC"}})");
    FAIL("a CTC decoder was accepted");
  } catch (const Error& e) {
    CHECK(e.exit_code == 2);
    CHECK_THAT(e.what(), Catch::Contains("tokenizer.json': its decoder 'CTC' is not one gputrain reads"));
  }
  CHECK_THROWS_WITH(decoder(dir, "{"), Catch::Contains("is not JSON"));
  // Fields of the wrong type, a bad byte token, an id no vocabulary reaches: usage errors, no crash.
  for (const char* bad : {R"({"model": {"vocab": {"a": 0}}, "decoder": "ByteLevel"})",
                          R"({"model": {"vocab": {"a": 0}}, "decoder": {"type": "Metaspace", "replacement": 5}})",
                          R"({"model": {"vocab": {"a": 0}}, "decoder": {"type": "Sequence", "decoders": "x"}})",
                          R"({"model": {"vocab": {"a": 1000000000000}}})"}) {
    INFO(bad);
    try {
      decoder(dir, bad);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.exit_code == 2);
    }
  }
  CHECK(decoder(dir, R"({"model": {"vocab": {"<0xZZ>": 0}}, "decoder": {"type": "ByteFallback"}})").decode({0}) ==
        "<0xZZ>");
  CHECK_THROWS_WITH(TokenDecoder::load(dir / "missing.json"), Catch::Contains("missing.json' cannot be read"));
}

TEST_CASE("token decoder: each ill-formed UTF-8 subpart becomes one U+FFFD", "[text]") {
  const std::string r = "\xEF\xBF\xBD";
  CHECK(valid_utf8("plain") == "plain");
  CHECK(valid_utf8("\xC3\xA9\xE2\x82\xAC") == "\xC3\xA9\xE2\x82\xAC");  // é €
  CHECK(valid_utf8("a\xE2\x82") == "a" + r);                            // a 3-byte character cut after 2
  CHECK(valid_utf8("\xE2\x82z") == r + "z");
  CHECK(valid_utf8("\x80\x80") == r + r);       // two stray continuation bytes
  CHECK(valid_utf8("\xC0\xAF") == r + r);       // an overlong slash: no well-formed prefix
  CHECK(valid_utf8("\xED\xA0\x80") == r + r + r);  // a surrogate
  CHECK(valid_utf8("\xF0\x9F\x98") == r);       // an emoji cut short
}

TEST_CASE("sentencepiece: a .model encodes prompts and decodes texts as the sentencepiece package (tests/python/sentencepiece_check.py)",
          "[text][python][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("sentencepiece_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  if (code == 77) {
    WARN("sentencepiece is not installed (.pydeps-text): .model tokenizers not compared with it");
    return;
  }
  CHECK(code == 0);
}
