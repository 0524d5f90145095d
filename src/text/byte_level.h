// GPT-2's byte-level alphabet, shared by the encoder and the decoder of tokenizer.json files:
// every byte stands as one printable character, so a byte string is a text a vocabulary can hold.
#pragma once
#include <cstdint>

namespace gputrain {

// The code point that stands for byte `b`: printable Latin-1 bytes stand for themselves, the
// others take code points from 256 up, in byte order.
uint32_t byte_level_code_point(unsigned char b);

}  // namespace gputrain
