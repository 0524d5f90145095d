// Merges a Config: built-in defaults < --preset < --config file < command-line flags.
#include "config/merge.h"

#include <nlohmann/json.hpp>

#include "config/fields.h"
#include "config/presets.h"
#include "core/error.h"
#include "core/text.h"

namespace gputrain {

namespace {

// Applies the flags over `c` (source flags excepted), then the range checks; throws with every
// problem, including those already in `problems`.
Config finish(Config c, const std::vector<FlagArg>& flags, std::vector<std::string> problems, bool resuming) {
  const Config sources = c;
  for (const auto& f : flags) {
    const Field* field = find_field(f.name);
    if (!field) {
      problems.push_back("unknown flag '" + f.raw + "'" + did_you_mean(f.name, config_field_names()));
      continue;
    }
    if (field->group == "source") {
      // Resuming, the checkpoint holds the configuration: repeating the original command's
      // --preset/--config is fine, naming different ones is a mistake.
      const std::string& saved = f.name == "preset" ? sources.preset : sources.config;
      if (resuming && f.value && *f.value != saved)
        problems.push_back("flag " + f.raw + " '" + *f.value + "' differs from the resumed run's '" + saved + "'");
      else if (!f.value || f.value->empty())
        problems.push_back("flag " + f.raw + " needs a value");
      continue;
    }
    set_field_flag(c, *field, f.value, f.negated, problems);
  }
  // Range and choice checks run even after type errors, so one run reports everything.
  auto more = config_problems(c);
  problems.insert(problems.end(), more.begin(), more.end());
  if (!problems.empty())
    throw Error(problems, "gputrain train --help lists every flag; gputrain presets lists presets", kExitUsage);
  return c;
}

}  // namespace

Config resolve_config(const std::vector<FlagArg>& flags) {
  std::vector<std::string> problems;
  Config c;

  // The sources come first, whatever their position on the command line.
  for (const auto& f : flags) {
    if ((f.name == "preset" || f.name == "config") && !f.negated && f.value && !f.value->empty())
      (f.name == "preset" ? c.preset : c.config) = *f.value;
  }
  auto apply_file = [&](const std::string& path, bool is_preset) {
    try {
      apply_json(c, load_json_file(path), path, problems,
                 is_preset ? std::vector<std::string>{"description"} : std::vector<std::string>{});
    } catch (const Error& e) {
      problems.insert(problems.end(), e.problems.begin(), e.problems.end());
    }
  };
  try {
    apply_file(find_preset(c.preset), true);
  } catch (const Error& e) {
    problems.insert(problems.end(), e.problems.begin(), e.problems.end());
  }
  if (!c.config.empty()) apply_file(c.config, false);
  return finish(c, flags, problems, false);
}

Config resolve_resumed_config(const nlohmann::json& saved, const std::vector<FlagArg>& flags) {
  std::vector<std::string> problems;
  Config c;
  apply_json(c, saved, "the checkpoint's configuration", problems, {"preset", "config"});
  c.preset = saved.value("preset", c.preset);
  c.config = saved.value("config", c.config);
  return finish(c, flags, problems, true);
}

}  // namespace gputrain
