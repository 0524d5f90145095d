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

// The run folder's flags, which train alone reads: benchmark, eval and infer write no run folder,
// so for them these would be parsed and ignored. One problem per such flag on the line.
inline std::vector<std::string> run_folder_flags_given(const std::vector<FlagArg>& flags, const std::string& command) {
  std::vector<std::string> problems;
  for (const char* name : {"output_dir", "save_checkpoints", "tensorboard", "export", "resume", "allow_data_change",
                           "keep_checkpoints", "time_limit", "profile", "sample_every", "sample_tokens"})
    if (has_flag(flags, name))
      problems.push_back("flag --" + std::string(name) + " is train's (its run folder): " + command + " writes none" +
                         (std::string(name) == "profile" ? "; GPUTRAIN_PROFILE=DIR records any command" : ""));
  return problems;
}

}  // namespace gputrain
