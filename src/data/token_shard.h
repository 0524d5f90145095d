// One file of tokens, memory-mapped: llm.c's shards (a 256 x int32 header, then uint16 or
// uint32 tokens), nanoGPT's headerless uint16 .bin, or a 1-D integer .npy.
#pragma once
#include <cstdint>
#include <string>

#include "core/mapped_file.h"

namespace gputrain {

struct TokenShard {
  std::string path;
  std::string format;  // for the data line: "llm.c uint16", "llm.c uint32", "uint16 (no header)", "npy int32"
  int64_t count = 0;   // tokens
  // Tokens [first, first + n) as int64 into `out` (bounds are the caller's: first + n <= count).
  void read(int64_t first, int64_t n, int64_t* out) const;
  // The largest token and its position (a scan of the whole shard).
  std::pair<int64_t, int64_t> max_token() const;

  MappedFile file;
  const uint8_t* tokens = nullptr;  // inside file
  int width = 2;                    // bytes per token
  bool is_signed = false;
};

// Opens `path`. Exit 2 naming the file for: a known magic with another version, a header whose
// count disagrees with the file's size (a truncated shard), a header-shaped start with an
// unknown magic, an odd-sized headerless file, a .npy that is not 1-D integers.
TokenShard open_token_shard(const std::string& path);

}  // namespace gputrain
