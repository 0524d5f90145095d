// Brace expansion by hand (glob(3)'s GLOB_BRACE is a GNU extension and knows no ranges), then
// glob(3) for the wildcards.
#include "data/shard_pattern.h"

#include <glob.h>

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {
namespace {

constexpr size_t kMaxShards = 1'000'000;
const char* kHint = "write shards as DIR/train-{000000..000127}.tar, DIR/train-*.tar or a comma set {a,b}";

// The alternatives of one brace group's inside: "000..127" or "a,b,c".
std::vector<std::string> alternatives(const std::string& inside, const std::string& pattern) {
  const size_t dots = inside.find("..");
  if (dots != std::string::npos && inside.find(',') == std::string::npos) {
    const std::string lo = inside.substr(0, dots), hi = inside.substr(dots + 2);
    const auto digits = [](const std::string& s) {
      return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(lo) || !digits(hi) || std::stoll(lo) > std::stoll(hi))
      throw usage_error(fmt::format("shard pattern '{}': '{{{}}}' is not a range FIRST..LAST of numbers", pattern, inside),
                        kHint);
    // Zero-padded to the width of the bounds as written, as WebDataset's braceexpand does.
    const size_t width = std::max(lo.size(), hi.size());
    if (std::stoll(hi) - std::stoll(lo) >= static_cast<long long>(kMaxShards))
      throw usage_error(fmt::format("shard pattern '{}' names more than {} shards", pattern, kMaxShards));
    std::vector<std::string> out;
    for (long long i = std::stoll(lo); i <= std::stoll(hi); ++i) out.push_back(fmt::format("{:0{}}", i, width));
    return out;
  }
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = inside.find(',', start);
    out.push_back(inside.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

void expand_braces(const std::string& s, const std::string& pattern, std::vector<std::string>& out) {
  const size_t open = s.find('{');
  if (open == std::string::npos) {
    if (s.find('}') != std::string::npos)
      throw usage_error(fmt::format("shard pattern '{}' has a '}}' without its '{{'", pattern), kHint);
    if (out.size() >= kMaxShards)
      throw usage_error(fmt::format("shard pattern '{}' names more than {} shards", pattern, kMaxShards));
    out.push_back(s);
    return;
  }
  const size_t close = s.find('}', open);
  if (close == std::string::npos)
    throw usage_error(fmt::format("shard pattern '{}' has a '{{' without its '}}'", pattern), kHint);
  const std::string inside = s.substr(open + 1, close - open - 1);
  if (inside.find('{') != std::string::npos)
    throw usage_error(fmt::format("shard pattern '{}': nested braces are not supported", pattern), kHint);
  for (const auto& alt : alternatives(inside, pattern))
    expand_braces(s.substr(0, open) + alt + s.substr(close + 1), pattern, out);
}

bool has_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

}  // namespace

std::vector<std::string> expand_shards(const std::string& pattern) {
  if (pattern.empty()) throw usage_error("--data_dir is empty: name the shards", kHint);
  std::vector<std::string> names, files;
  expand_braces(pattern, pattern, names);
  for (const auto& n : names) {
    if (!has_glob(n)) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(n, ec))
        throw usage_error(fmt::format("shard '{}' (from '{}') not found, or not a file", n, pattern), kHint);
      files.push_back(n);
      continue;
    }
    glob_t g{};
    const int rc = glob(n.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
      globfree(&g);
      throw usage_error(fmt::format("shard pattern '{}' matches no file", n), kHint);
    }
    if (rc != 0) {
      globfree(&g);
      throw usage_error(fmt::format("shard pattern '{}': cannot list its folder", n));
    }
    for (size_t i = 0; i < g.gl_pathc; ++i) files.push_back(g.gl_pathv[i]);  // glob sorts them
    globfree(&g);
  }
  return files;
}

}  // namespace gputrain
