// Splits a command line into flags and positional words with cxxopts; knows nothing about their meaning.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "config/flag_arg.h"

namespace gputrain {

struct Args {
  std::vector<std::string> positionals;
  std::vector<FlagArg> flags;  // in the order typed

  // Removes a boolean command-local flag (like --json or --help) and says whether it was set.
  bool take_switch(const std::string& name);
  // Removes a command-local flag with a value; nullopt when absent, "" when given bare. Given
  // twice, the later one counts (as for the configuration flags).
  std::optional<std::string> take_value(const std::string& name);
  // Removes a command-local flag that may be given several times (generate's --stop): every value, in order.
  std::vector<std::string> take_values(const std::string& name);
};

// A command's own flags, beside the configuration fields (e.g. infer's --checkpoint).
struct LocalFlag {
  std::string name;
  bool takes_value;
};

// Splits a command's words with cxxopts. With config_fields, every field of the table is a
// known flag too; "help" is always a known boolean. A local flag shadows a field of the same name
// (benchmark's --warmup_steps).
//
// Never throws for a bad flag: unknown flags, missing values and "--no-" on a non-boolean come
// back in `flags`, so that resolve_config / reject_leftover_flags report every problem at once.
// Spellings: --batch_size / --batch-size, --x=v / --x v (a value may start with one dash:
// "--lr -1"), booleans --x, --x=false, --no-x, --no_x; -h is --help; "--" ends the flags.
Args parse_command_line(const std::vector<std::string>& words, const std::vector<LocalFlag>& local, bool config_fields);

}  // namespace gputrain
