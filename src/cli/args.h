// Splits a command line into flags and positional words; knows nothing about their meaning.
#pragma once
#include <functional>
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

struct Args {
  std::vector<std::string> positionals;
  std::vector<FlagArg> flags;

  // Removes a boolean command-local flag (like --json or --help) and says whether it was set.
  bool take_switch(const std::string& name);
  // Removes a command-local flag with a value; nullopt when absent, "" when given bare.
  std::optional<std::string> take_value(const std::string& name);
};

// `is_bool(name)` says whether a flag is a boolean: then "--x value" does not consume the next
// word. "--no-x" is always read as x negated (and rejected later when x is not a boolean). "-h" is "--help"; "--" ends
// the flags.
Args parse_args(const std::vector<std::string>& words, const std::function<bool(const std::string&)>& is_bool);

}  // namespace gputrain
