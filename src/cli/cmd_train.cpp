// `gputrain train`: resolve the configuration and run training.
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "config/fields.h"
#include "config/merge.h"
#include "core/error.h"
#include "core/text.h"
#include "train/checkpoint.h"
#include "train/train_run.h"

namespace gputrain {
namespace {

void print_train_help() {
  std::printf(
      "usage: gputrain train [--preset NAME|file.json] [--config file.json] [flags]\n\n"
      "Precedence: built-in defaults < preset (default: quickstart) < --config < flags.\n"
      "Flags take snake_case or kebab-case; booleans take --x, --x=false, --no-x.\n");
  std::string group;
  const Config defaults;
  for (const auto& f : config_fields()) {
    if (f.group != group) {
      group = f.group;
      std::printf("\n%s:\n", group.c_str());
    }
    auto v = f.get(defaults);
    std::string def = v.is_string() ? v.get<std::string>() : v.dump();
    std::string type;  // built by appends: gcc 12 warns falsely on "{" + std::string
    if (!f.choices.empty())
      type.append("{").append(join(f.choices, "|")).append("}");
    else if (!f.is_bool())
      type = f.type_name();
    if (!def.empty()) def = " [" + def + "]";
    std::printf("  --%-22s %-10s %s%s\n", f.name.c_str(), type.c_str(), f.help.c_str(), def.c_str());
  }
}

}  // namespace

int cmd_train(const std::vector<std::string>& words) {
  Args args = parse_config_args(words);
  if (args.take_switch("help")) {
    print_train_help();
    return 0;
  }
  if (!args.positionals.empty())
    throw usage_error("unexpected argument '" + args.positionals[0] + "' to train",
                      "flags start with --, e.g. --epochs 3 (gputrain train --help)");
  Config c = resolve_config(args.flags);
  if (!c.resume.empty()) {
    // auto: the run folder's last checkpoint, or a fresh start when there is none yet (so one
    // command line serves the first session and every later one).
    std::string path = c.resume == "auto" ? c.output_dir + "/checkpoints/last.pt" : c.resume;
    if (c.resume == "auto" && !std::filesystem::exists(path)) {
      std::printf("resume: no checkpoint in %s yet; starting a new run\n", c.output_dir.c_str());
      c.resume.clear();
    } else {
      auto meta = read_checkpoint_meta(path);
      c = resolve_resumed_config(nlohmann::json::parse(meta.config_json), args.flags);
      c.resume = path;
    }
  }
  return run_training(c);
}

}  // namespace gputrain
