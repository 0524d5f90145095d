// `gputrain launch [flags] -- COMMAND [flags]`: the local ranks of a data-parallel job.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/text.h"
#include "parallel/launcher.h"

namespace gputrain {
namespace {

int int_flag(const std::string& name, const std::optional<std::string>& v, int fallback, int lo, int hi) {
  if (!v) return fallback;
  const auto n = parse_integer(*v);
  if (!n || *n < lo || *n > hi) throw usage_error(fmt::format("--{} '{}' must be an integer from {} to {}", name, *v, lo, hi));
  return static_cast<int>(*n);
}

}  // namespace

int cmd_launch(const std::vector<std::string>& words) {
  // The ranks' own command line follows "--"; it is theirs to parse.
  const auto dashes = std::find(words.begin(), words.end(), "--");
  const std::vector<std::string> mine(words.begin(), dashes);
  const char* example = "gputrain launch --nproc_per_node 2 -- train --preset smoke";
  Args args = parse_command_line(mine,
                                 {{"nproc_per_node", true},
                                  {"nnodes", true},
                                  {"node_rank", true},
                                  {"master_addr", true},
                                  {"master_port", true}},
                                 false);
  if (args.take_switch("help")) {
    fmt::print(
        "usage: gputrain launch [--nproc_per_node N|auto] [--nnodes M --node_rank R --master_addr A\n"
        "                       --master_port P] -- COMMAND [FLAGS...]\n\n"
        "Starts N ranks of `gputrain COMMAND FLAGS` on this node with torchrun's environment\n"
        "(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), their output\n"
        "prefixed with [rankK]. SIGINT/SIGTERM go to every rank; when one rank fails the others are\n"
        "stopped and launch exits with its code. --nproc_per_node auto: one rank per visible GPU.\n"
        "Each rank's intra-op threads default to this machine's cores / N (OMP_NUM_THREADS wins).\n"
        "One node picks a free port; several nodes need --master_addr and --master_port.\n"
        "In a Kubeflow PyTorchJob pod the flags default to PET_NPROC_PER_NODE, PET_NNODES,\n"
        "PET_NODE_RANK, MASTER_ADDR and MASTER_PORT.\n");
    return 0;
  }
  LaunchOptions o;
  // In a Kubeflow PyTorchJob pod the operator sets PET_NPROC_PER_NODE, PET_NNODES and
  // PET_NODE_RANK (torchrun's defaults) and MASTER_ADDR/MASTER_PORT: the flags default to them.
  auto env_or = [](std::optional<std::string> flag, const char* variable) {
    const char* v = std::getenv(variable);
    return flag || !v || !*v ? flag : std::optional<std::string>(v);
  };
  const auto nproc = env_or(args.take_value("nproc_per_node"), "PET_NPROC_PER_NODE");
  if (nproc && *nproc == "auto") {
    const int gpus = visible_gpu_count();
    o.nproc_per_node = std::max(gpus, 1);
    fmt::print(stderr, "gputrain launch: --nproc_per_node auto -> {} ({})\n", o.nproc_per_node,
               gpus > 0 ? fmt::format("{} visible GPU{}", gpus, gpus == 1 ? "" : "s")
                        : "no GPU visible: one rank, whose intra-op threads use every core; give a number for more");
  } else {
    o.nproc_per_node = int_flag("nproc_per_node", nproc, 1, 1, 1024);
  }
  o.nnodes = int_flag("nnodes", env_or(args.take_value("nnodes"), "PET_NNODES"), 1, 1, 100000);
  o.node_rank = int_flag("node_rank", env_or(args.take_value("node_rank"), "PET_NODE_RANK"), 0, 0, o.nnodes - 1);
  const bool pod = std::getenv("PET_NNODES") != nullptr;  // MASTER_* are the job's own there
  o.master_port = int_flag("master_port", pod ? env_or(args.take_value("master_port"), "MASTER_PORT") : args.take_value("master_port"),
                           0, 1, 65535);
  const auto addr = pod ? env_or(args.take_value("master_addr"), "MASTER_ADDR") : args.take_value("master_addr");
  if (addr) o.master_addr = *addr;
  const bool addr_given = addr.has_value();
  // Without "--" the ranks' flags read as launch's own: one line that says so, not one per flag.
  if (dashes == words.end() && (!args.positionals.empty() || !args.flags.empty()))
    throw usage_error("launch needs '--' before the ranks' command", example);
  reject_leftover_flags(args, {"nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port", "help"});
  if (!args.positionals.empty())
    throw usage_error("launch: '" + args.positionals[0] + "' before '--'", example);
  if (dashes == words.end() || dashes + 1 == words.end()) throw usage_error("launch needs the ranks' command after '--'", example);
  // Several nodes on one machine may well meet at 127.0.0.1; what they need is to be told alike.
  if (o.nnodes > 1 && (o.master_port == 0 || !addr_given))
    throw usage_error(fmt::format("launch over {} nodes needs{}{}", o.nnodes, addr_given ? "" : " --master_addr (node 0's address)",
                                  o.master_port == 0 ? (addr_given ? " --master_port" : " and --master_port") : ""),
                      "the same values on every node, e.g. --master_addr node01 --master_port 29500");
  o.command.assign(dashes + 1, words.end());
  std::error_code ec;
  o.exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw runtime_error("cannot find the gputrain binary (/proc/self/exe): " + ec.message());
  return launch(o);
}

}  // namespace gputrain
