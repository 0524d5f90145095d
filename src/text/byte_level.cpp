// GPT-2's byte-level alphabet (byte_level.h).
#include "text/byte_level.h"

namespace gputrain {

uint32_t byte_level_code_point(unsigned char b) {
  const auto printable = [](uint32_t c) { return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE); };
  if (printable(b)) return b;
  uint32_t extra = 0;
  for (uint32_t c = 0; c < b; ++c) extra += printable(c) ? 0 : 1;
  return 256 + extra;
}

}  // namespace gputrain
