// `gputrain train`: resolve the configuration and run training.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "config/fields.h"
#include "core/error.h"
#include "core/text.h"
#include "app/train_run.h"

namespace gputrain {
namespace {

void print_train_help() {
  fmt::print(
      "usage: gputrain train [--preset NAME|file.json] [--config file.json] [flags]\n\n"
      "Precedence: built-in defaults < preset (default: quickstart) < --config < flags.\n"
      "Flags take snake_case or kebab-case; booleans take --x, --x=false, --no-x.\n");
  std::string group;
  const Config defaults;
  for (const auto& f : config_fields()) {
    if (f.group != group) {
      group = f.group;
      fmt::print("\n{}:\n", group);
    }
    auto v = f.get(defaults);
    std::string def = v.is_string() ? v.get<std::string>() : v.dump();
    std::string type;  // built by appends: gcc 12 warns falsely on "{" + std::string
    if (!f.choices.empty())
      type.append("{").append(join(f.choices, "|")).append("}");
    else if (!f.is_bool())
      type = f.type_name();
    if (!def.empty()) def = " [" + def + "]";
    fmt::print("  --{:<22} {:<10} {}{}\n", f.name, type, f.help, def);
  }
}

}  // namespace

int cmd_train(const std::vector<std::string>& words) {
  Args args = parse_command_line(words, {}, true);
  if (args.take_switch("help")) {
    print_train_help();
    return 0;
  }
  if (!args.positionals.empty())
    throw usage_error("unexpected argument '" + args.positionals[0] + "' to train",
                      "flags start with --, e.g. --epochs 3 (gputrain train --help)");
  return run_training(args.flags);
}

}  // namespace gputrain
