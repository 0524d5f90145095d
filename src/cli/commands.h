// The command table: every `gputrain <command>` with its one-line summary and entry point.
#pragma once
#include <string>
#include <vector>

namespace gputrain {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& words);  // words after the command name
};

const std::vector<Command>& commands();

// Dispatches argv, prints errors for people, and returns the process exit code.
int run_cli(int argc, char** argv);

// The commands (one file each in cli/).
int cmd_train(const std::vector<std::string>& words);
int cmd_info(const std::vector<std::string>& words);
int cmd_presets(const std::vector<std::string>& words);
int cmd_benchmark(const std::vector<std::string>& words);
int cmd_report(const std::vector<std::string>& words);
int cmd_eval(const std::vector<std::string>& words);
int cmd_infer(const std::vector<std::string>& words);
int cmd_generate(const std::vector<std::string>& words);
int cmd_export(const std::vector<std::string>& words);
int cmd_consolidate(const std::vector<std::string>& words);
int cmd_models(const std::vector<std::string>& words);
int cmd_launch(const std::vector<std::string>& words);

// Rejects any flag left after a command took its own; throws a usage error with suggestions.
struct Args;
void reject_leftover_flags(const Args& args, const std::vector<std::string>& known);

// Prints "gputrain: error: ..." lines and the hint to stderr.
void print_error(const std::vector<std::string>& problems, const std::string& hint) noexcept;

}  // namespace gputrain
