// The IDX format of MNIST-family datasets (raw or gzip), checked before anything is allocated.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gputrain {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // dims' product bytes
};

// Reads an unsigned-byte IDX file, gzip-compressed or not. Throws a usage error naming the
// file and the reason: missing, bad magic, unsupported type, absurd dimensions, truncated.
IdxArray read_idx(const std::string& path);

}  // namespace gputrain
