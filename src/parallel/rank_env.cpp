// Rank, world and rendezvous from torchrun's or Slurm's environment.
#include "parallel/rank_env.h"

#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"

namespace gputrain {
namespace {

int parse_int(const std::string& text, const std::string& what) {
  const auto v = parse_integer(text);
  if (!v || *v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) throw std::invalid_argument(fmt::format("{} '{}' is not an integer", what, text));
  return static_cast<int>(*v);
}

// Splits at commas outside brackets: "n[1-2,4],m" -> "n[1-2,4]", "m".
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char ch : s) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (depth < 0) throw std::invalid_argument("unbalanced ']'");
    if (ch == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (depth != 0) throw std::invalid_argument("unbalanced '['");
  parts.push_back(cur);
  return parts;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
  std::vector<std::string> hosts;
  for (const auto& item : split_top(list)) {
    if (item.empty()) throw std::invalid_argument("an empty host name");
    const auto open = item.find('[');
    if (open == std::string::npos) {
      hosts.push_back(item);
      continue;
    }
    const auto close = item.find(']', open);
    const std::string prefix = item.substr(0, open), suffix = item.substr(close + 1);
    if (suffix.find('[') != std::string::npos) throw std::invalid_argument("more than one bracket in '" + item + "'");
    std::string ranges = item.substr(open + 1, close - open - 1);
    size_t start = 0;
    while (start <= ranges.size()) {
      const auto comma = ranges.find(',', start);
      const std::string r = ranges.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const auto dash = r.find('-');
      const std::string lo = r.substr(0, dash), hi = dash == std::string::npos ? lo : r.substr(dash + 1);
      const int a = parse_int(lo, "host number"), b = parse_int(hi, "host number");
      if (a < 0 || b < a) throw std::invalid_argument("range '" + r + "' runs backwards");
      if (b - a > 100000) throw std::invalid_argument("range '" + r + "' is too long");
      for (int n = a; n <= b; ++n) {
        std::string num = std::to_string(n);
        if (num.size() < lo.size()) num.insert(0, lo.size() - num.size(), '0');  // n[01-04] keeps its padding
        hosts.push_back(prefix + num + suffix);
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return hosts;
}

std::vector<int> expand_tasks_per_node(const std::string& list) {
  std::vector<int> counts;
  for (const auto& item : split_top(list)) {
    const auto paren = item.find("(x");
    const int tasks = parse_int(item.substr(0, paren), "task count");
    int repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')') throw std::invalid_argument("'" + item + "' lacks its ')'");
      repeat = parse_int(item.substr(paren + 2, item.size() - paren - 3), "repeat count");
    }
    if (tasks < 1 || repeat < 1) throw std::invalid_argument("'" + item + "' has a count below 1");
    counts.insert(counts.end(), static_cast<size_t>(repeat), tasks);
  }
  return counts;
}

RankEnv read_rank_env(const GetEnv& getenv) {
  auto get = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v ? std::string(v) : std::string();
  };
  auto need_int = [&](const char* name, int fallback) {
    const std::string v = get(name);
    if (v.empty()) return fallback;
    try {
      return parse_int(v, name);
    } catch (const std::invalid_argument& e) {
      throw usage_error(fmt::format("environment variable {}={} is not an integer", name, v),
                        "unset it, or start the ranks with gputrain launch, torchrun or srun");
    }
  };
  RankEnv e;
  if (!get("RANK").empty() || !get("WORLD_SIZE").empty()) {
    e.source = "torchrun";
    e.rank = need_int("RANK", 0);
    e.world_size = need_int("WORLD_SIZE", 1);
    e.local_rank = need_int("LOCAL_RANK", e.rank);
    e.local_world_size = need_int("LOCAL_WORLD_SIZE", e.world_size);
    e.node_rank = need_int("GROUP_RANK", e.local_world_size > 0 ? e.rank / e.local_world_size : 0);
    e.agent_store = get("TORCHELASTIC_USE_AGENT_STORE") == "True";
    e.restart_count = need_int("TORCHELASTIC_RESTART_COUNT", 0);
    if (!get("TORCHELASTIC_RUN_ID").empty() && get("TORCHELASTIC_RUN_ID") != "none")
      e.job = "torchrun job " + get("TORCHELASTIC_RUN_ID");
    else if (!get("TORCHELASTIC_RUN_ID").empty()) {  // static rendezvous: the agent is this node's parent process
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      e.job = fmt::format("torchrun agent {} on {}", ::getppid(), host);
    }
  } else if (!get("SLURM_PROCID").empty() && !get("SLURM_NTASKS").empty()) {
    e.source = "slurm";
    e.rank = need_int("SLURM_PROCID", 0);
    e.world_size = need_int("SLURM_NTASKS", 1);
    e.local_rank = need_int("SLURM_LOCALID", 0);
    e.node_rank = need_int("SLURM_NODEID", 0);
    const std::string per_node = !get("SLURM_TASKS_PER_NODE").empty()       ? get("SLURM_TASKS_PER_NODE")
                                 : !get("SLURM_STEP_TASKS_PER_NODE").empty() ? get("SLURM_STEP_TASKS_PER_NODE")
                                                                             : get("SLURM_NTASKS_PER_NODE");
    e.local_world_size = e.world_size;
    if (!per_node.empty()) {
      try {
        const auto counts = expand_tasks_per_node(per_node);
        e.local_world_size = counts.at(std::min(static_cast<size_t>(e.node_rank), counts.size() - 1));
      } catch (const std::exception& ex) {
        throw usage_error(fmt::format("SLURM_TASKS_PER_NODE={} cannot be read: {}", per_node, ex.what()),
                          "expected a form like 2(x3),1");
      }
    }
    const std::string nodes = !get("SLURM_JOB_NODELIST").empty() ? get("SLURM_JOB_NODELIST") : get("SLURM_NODELIST");
    if (!nodes.empty()) {
      try {
        e.master_addr = expand_hostlist(nodes).front();
      } catch (const std::exception& ex) {
        throw usage_error(fmt::format("SLURM_JOB_NODELIST={} cannot be read: {}", nodes, ex.what()),
                          "expected a form like node[01-04,07]");
      }
    }
    // Every task of the job derives the same port from the job id, away from the common
    // defaults; MASTER_PORT (below) wins.
    if (!get("SLURM_JOB_ID").empty()) e.master_port = 15000 + need_int("SLURM_JOB_ID", 0) % 20000;
    // A requeued job (scontrol requeue, a preempted node) starts again with a count.
    e.restart_count = need_int("SLURM_RESTART_COUNT", 0);
    if (!get("SLURM_JOB_ID").empty()) e.job = "slurm job " + get("SLURM_JOB_ID");
    // srun gives each task its step; the batch script itself has none. Started there, this one
    // process would wait the whole --dist_timeout for the other tasks.
    if (e.world_size > 1 && get("SLURM_STEP_ID").empty() && get("SLURM_STEPID").empty())
      throw usage_error(fmt::format("SLURM_NTASKS={} but this process was not started by srun (no SLURM_STEP_ID): it "
                                    "would wait for {} tasks that never come",
                                    e.world_size, e.world_size - 1),
                        "in the sbatch script, start the tasks with `srun gputrain train ...`");
  }
  // A Kubeflow PyTorchJob pod: RANK and WORLD_SIZE count pods; with several processes per pod
  // (PET_NPROC_PER_NODE) they are not a process's rank until torchrun or gputrain launch start
  // the processes (they set LOCAL_RANK).
  if (e.source == "torchrun" && get("LOCAL_RANK").empty() && !get("PET_NPROC_PER_NODE").empty() &&
      get("PET_NPROC_PER_NODE") != "1")
    throw usage_error(fmt::format("this is pod {} of a PyTorchJob with PET_NPROC_PER_NODE={}: RANK and WORLD_SIZE count "
                                  "pods, not processes",
                                  e.rank, get("PET_NPROC_PER_NODE")),
                      "start the pod's processes with `gputrain launch -- train ...` (it reads PET_*) or torchrun");
  if (!get("MASTER_ADDR").empty()) e.master_addr = get("MASTER_ADDR");
  e.master_port = need_int("MASTER_PORT", e.master_port);

  auto bad = [&](const std::string& what) {
    throw usage_error(fmt::format("the {} environment is inconsistent: {}", e.source, what),
                      "start the ranks with gputrain launch, torchrun or srun, or unset the variables");
  };
  if (e.world_size < 1) bad(fmt::format("world size {}", e.world_size));
  if (e.rank < 0 || e.rank >= e.world_size) bad(fmt::format("rank {} outside world size {}", e.rank, e.world_size));
  if (e.local_world_size < 1 || e.local_world_size > e.world_size)
    bad(fmt::format("{} local ranks in a world of {}", e.local_world_size, e.world_size));
  if (e.local_rank < 0 || e.local_rank >= e.local_world_size)
    bad(fmt::format("local rank {} outside {} local ranks", e.local_rank, e.local_world_size));
  if (e.master_port < 1 || e.master_port > 65535) bad(fmt::format("master port {}", e.master_port));
  return e;
}

RankEnv read_rank_env() {
  return read_rank_env([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

std::string RankEnv::describe() const {
  if (source.empty()) return "one process";
  return fmt::format("rank {} of {} (local {} of {}, node {}) from {}, rendezvous {}:{}{}", rank, world_size,
                     local_rank, local_world_size, node_rank, source, master_addr, master_port,
                     agent_store ? " (torchrun's store)" : "");
}

}  // namespace gputrain
