// `gputrain info`: the device query (versions, GPUs, CPU), as text or one JSON object.
#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/info.h"

namespace gputrain {

int cmd_info(const std::vector<std::string>& words) {
  Args args = parse_command_line(words, {{"json", false}}, false);
  if (args.take_switch("help")) {
    fmt::print(
        "usage: gputrain info [--json]\n\n"
        "Shows LibTorch, CUDA, cuDNN and NCCL versions, every GPU (memory, compute\n"
        "capability, bf16/TF32 support) and the CPU. --json prints one JSON object.\n");
    return 0;
  }
  const bool as_json = args.take_switch("json");
  reject_leftover_flags(args, {"json", "help"});
  print_info(as_json);
  return 0;
}

}  // namespace gputrain
