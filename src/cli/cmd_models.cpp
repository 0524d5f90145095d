// `gputrain models`: every model in the registry with its parameter count for one input shape,
// and the sample shapes it takes; a model that cannot take the shape says so on its row.
#include <algorithm>
#include <variant>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "config/fields.h"
#include "config/merge.h"
#include "core/error.h"
#include "core/text.h"
#include "models/model_table.h"

namespace gputrain {
namespace {

void print_help() {
  fmt::print(
      "usage: gputrain models [--input_shape 3x32x32] [--num_classes 10] [model flags]\n\n"
      "Lists every model with its parameter count for samples of --input_shape (without the\n"
      "batch: C x H x W images, T x F sequences, F table rows, C x D x H x W volumes) and\n"
      "--num_classes outputs. Model flags (--width, --depth, --stem, --heads) change the counts\n"
      "as they would in `gputrain train`; without --preset or --config, each model runs at its\n"
      "own defaults (the quickstart preset's width is for its cnn).\n");
}

}  // namespace

int cmd_models(const std::vector<std::string>& words) {
  Args args = parse_command_line(words, {}, true);
  if (args.take_switch("help")) {
    print_help();
    return 0;
  }
  if (!args.positionals.empty())
    throw usage_error("unexpected argument '" + args.positionals[0] + "' to models",
                      "flags start with --, e.g. --input_shape 3x32x32 (gputrain models --help)");
  auto given = [&](const std::string& name) { return has_flag(args.flags, name); };
  // The shape comes from --input_shape, as synthetic data takes it (no dataset is read here).
  if (!given("dataset"))
    args.flags.insert(args.flags.begin(), FlagArg{"dataset", "synthetic", false, "--dataset synthetic"});
  Config c = resolve_config(args.flags);
  // The default preset's --width is tuned for its own model (the quickstart cnn); counts for
  // every model read better at each model's own defaults, unless the user names a source.
  if (!given("preset") && !given("config")) {
    const Config defaults;
    for (const auto& f : config_fields())
      if (f.group == "model" && !given(f.name)) std::visit([&](auto m) { c.*m = defaults.*m; }, f.member);
  }
  print_model_table(c);
  return 0;
}

}  // namespace gputrain
