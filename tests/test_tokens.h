// Token files for the language-model tests.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace gputrain::test {

// llm.c's layout: 256 int32 of header (magic, version, count), then the tokens; `count` may lie.
inline void write_llmc(const std::string& path, const std::vector<int64_t>& tokens, int32_t magic = 20240520,
                int32_t version = 1, int64_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<int32_t>(count >= 0 ? count : static_cast<int64_t>(tokens.size()));
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  for (int64_t t : tokens) {
    if (magic == 20240801) {
      const auto v = static_cast<uint32_t>(t);
      out.write(reinterpret_cast<const char*>(&v), 4);
    } else {
      const auto v = static_cast<uint16_t>(t);
      out.write(reinterpret_cast<const char*>(&v), 2);
    }
  }
}

}  // namespace gputrain::test
