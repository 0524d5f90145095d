// One command-line flag as typed, split but not yet interpreted (shared by cli/ and config/).
#pragma once
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace gputrain {

struct FlagArg {
  std::string name;                  // snake_case, without "--" or a "no_" prefix
  std::optional<std::string> value;  // absent for a bare "--flag"
  bool negated = false;              // "--no-flag" / "--no_flag"
  std::string raw;                   // as typed, for messages
};

// Whether the command line names flag `name` (snake_case) at all.
inline bool has_flag(const std::vector<FlagArg>& flags, const std::string& name) {
  return std::any_of(flags.begin(), flags.end(), [&](const FlagArg& f) { return f.name == name; });
}

}  // namespace gputrain
