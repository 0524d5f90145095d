// libFuzzer target: a tokenizer.json's decoder (text/token_decoder.h) and encoder
// (text/token_encoder.h) on arbitrary bytes, then decoding ids drawn from the input and encoding
// its UTF-8 repair. Errors for people are expected; crashes, hangs, leaks, huge allocations, text
// that is not UTF-8 and ids the file does not hold are bugs.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/token_decoder.h"
#include "text/token_encoder.h"

namespace {

bool is_utf8(const std::string& s) { return gputrain::valid_utf8(s) == s; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("tokenizer", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  try {
    const auto decoder = gputrain::TokenDecoder::load("/proc/self/fd/" + std::to_string(fd));
    std::vector<int64_t> ids;
    for (size_t i = 0; i < size && ids.size() < 64; ++i) ids.push_back(static_cast<int64_t>(data[i]) - 8);
    if (!is_utf8(decoder.decode(ids))) __builtin_trap();
  } catch (const gputrain::Error&) {
  }
  try {
    const auto encoder = gputrain::TokenEncoder::load("/proc/self/fd/" + std::to_string(fd));
    const std::string text = gputrain::valid_utf8(std::string(reinterpret_cast<const char*>(data), std::min<size_t>(size, 256)));
    for (int64_t id : encoder.encode(text))
      if (id < 0) __builtin_trap();  // the file's ids, each checked at load
  } catch (const gputrain::Error&) {
  }
  // The repair alone, on the raw bytes: its output is always UTF-8.
  if (!is_utf8(gputrain::valid_utf8(std::string(reinterpret_cast<const char*>(data), size)))) __builtin_trap();
  return 0;
}
