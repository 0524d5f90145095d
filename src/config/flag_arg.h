// One command-line flag as typed, split but not yet interpreted (shared by cli/ and config/).
#pragma once
#include <optional>
#include <string>

namespace gputrain {

struct FlagArg {
  std::string name;                  // snake_case, without "--" or a "no_" prefix
  std::optional<std::string> value;  // absent for a bare "--flag"
  bool negated = false;              // "--no-flag" / "--no_flag"
  std::string raw;                   // as typed, for messages
};

}  // namespace gputrain
