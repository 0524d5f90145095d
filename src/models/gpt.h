// gpt (models/gpt.cpp): what other parts need of its layout.
#pragma once
#include <cstdint>

namespace gputrain {

// Rows of the token embedding for a vocabulary of `vocab`: llm.c's multiple of 128.
int64_t gpt_padded_vocab(int64_t vocab);

}  // namespace gputrain
