// `gputrain report RUN_DIR`: rebuilds a run's report.html from the files in its folder.
#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "monitor/report_html.h"

namespace gputrain {

int cmd_report(const std::vector<std::string>& words) {
  Args args = parse_command_line(words, {}, false);
  if (args.take_switch("help")) {
    fmt::print(
        "usage: gputrain report RUN_DIR\n\n"
        "Rebuilds RUN_DIR/report.html (self-contained: inline SVG, no network) from its\n"
        "config.json, metrics.jsonl, monitor.csv and, when present, benchmark.json.\n");
    return 0;
  }
  reject_leftover_flags(args, {"help"});
  if (args.positionals.size() != 1) throw usage_error("report takes one run folder", "gputrain report runs/<name>");
  fmt::print("wrote {}\n", write_html_report(args.positionals[0]));
  return 0;
}

}  // namespace gputrain
