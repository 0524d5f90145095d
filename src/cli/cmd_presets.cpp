// `gputrain presets`: list the presets, or print one as JSON.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "config/presets.h"
#include "core/error.h"

namespace gputrain {

int cmd_presets(const std::vector<std::string>& words) {
  Args args = parse_command_line(words, {}, false);
  if (args.take_switch("help")) {
    fmt::print(
        "usage: gputrain presets             list presets with a one-line description\n"
        "       gputrain presets show NAME   print one preset as JSON\n\n"
        "Presets are searched in: $GPUTRAIN_PRESETS_DIR, then your own folder\n"
        "$XDG_CONFIG_HOME/gputrain/presets (~/.config/gputrain/presets), then the installed and\n"
        "source presets/ folders. A workload (model, data, epochs) is chosen with --preset, the\n"
        "device recipe (AMP, TF32, batch size, loader) with --device_preset, which is picked\n"
        "from the GPU by default; the workload's values win where both set one. A recipe that\n"
        "gputrain benchmark --save_recipe measured on this machine, for the run's workload,\n"
        "comes before the built-in one.\n");
    return 0;
  }
  reject_leftover_flags(args, {"help"});
  const auto& pos = args.positionals;
  if (pos.empty() || (pos[0] == "list" && pos.size() == 1)) {
    auto presets = list_presets();
    if (presets.empty()) throw usage_error("no presets found", "set GPUTRAIN_PRESETS_DIR to the presets/ folder");
    for (const bool device : {false, true}) {
      fmt::print("{}", device ? "\ndevice recipes (--device_preset; `auto`, the default, picks one from the GPU):\n"
                        : "workloads (--preset; `auto` is quickstart under the GPU's recipe):\n");
      for (const auto& p : presets)
        if (p.device == device) fmt::print("  {:<12} {}\n", p.name, p.description);
    }
    return 0;
  }
  if (pos[0] == "show" && pos.size() == 2) {
    fmt::print("{}\n", load_json_file(find_preset(pos[1])).dump(2));
    return 0;
  }
  throw usage_error("unexpected arguments to presets: '" + pos[0] + (pos.size() > 1 ? " ..." : "") + "'",
                    "gputrain presets [show NAME]");
}

}  // namespace gputrain
