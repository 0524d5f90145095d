// `gputrain info` and `--version`: versions, GPUs and the CPU.
#include "core/info.h"

#include <torch/version.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/device_cuda.h"
#include "core/device_probe.h"
#include "core/gpu_topology.h"
#include "core/install_dirs.h"
#include "core/text.h"

namespace gputrain {

std::string version_line() {
  return fmt::format("gputrain {} (git {}, LibTorch {}, CUDA {}, cuDNN {})", GPUTRAIN_VERSION, git_revision(),
                     TORCH_VERSION, cuda_build_version(), cudnn_version());
}

void print_info(bool as_json) {
  const MachineInfo m = probe_machine();
  nlohmann::json j;
  j["gputrain"] = GPUTRAIN_VERSION;
  j["git_revision"] = git_revision();
  j["libtorch"] = TORCH_VERSION;
  j["cuda_build"] = m.cuda_build;
  j["cuda_driver"] = cuda_driver_version();
  j["cudnn"] = m.cudnn;
  j["nccl"] = nccl_version();
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : m.gpus) {
    j["gpus"].push_back({{"index", g.index},
                         {"name", g.name},
                         {"total_memory_bytes", g.total_bytes},
                         {"free_memory_bytes", g.free_bytes},
                         {"compute_capability", fmt::format("{}.{}", g.major, g.minor)},
                         {"multiprocessors", g.multiprocessors},
                         {"bf16", g.bf16},
                         {"tf32", g.tf32}});
  }
  // With two GPUs or more: how each pair is linked (what data parallel's all-reduce rides on).
  const auto links = gpu_links(static_cast<int>(m.gpus.size()));
  if (!links.empty()) {
    j["gpu_links"] = nlohmann::json::array();
    for (const auto& l : links)
      j["gpu_links"].push_back({{"gpus", {l.a, l.b}}, {"peer_access", l.peer_access}, {"path", l.path.empty() ? "unknown" : l.path}});
  }
  j["cpu"] = {{"model", m.cpu_model}, {"cores", m.cpu_cores}, {"intra_op_threads", m.default_threads}};
  if (as_json) {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  auto row = [](const std::string& k, const std::string& v) { fmt::print("{:<18} {}\n", k, v); };
  row("gputrain", fmt::format("{} (git {})", GPUTRAIN_VERSION, git_revision()));
  row("LibTorch", TORCH_VERSION);
  row("CUDA (built)", m.cuda_build);
  row("CUDA driver", j["cuda_driver"].get<std::string>());
  row("cuDNN", m.cudnn);
  row("NCCL", j["nccl"].get<std::string>());
  if (m.gpus.empty()) row("GPUs", "none (torch sees no CUDA device)");
  for (const auto& g : m.gpus)
    row(fmt::format("GPU {}", g.index),
        fmt::format("{} | {} total, {} free | cc {}.{} | {} SMs | bf16 {} | TF32 {}", g.name,
                    format_bytes(static_cast<double>(g.total_bytes)), format_bytes(static_cast<double>(g.free_bytes)),
                    g.major, g.minor, g.multiprocessors, g.bf16 ? "yes" : "no", g.tf32 ? "yes" : "no"));
  for (const auto& l : links)
    row(fmt::format("GPU {} <-> GPU {}", l.a, l.b),
        fmt::format("{} | peer access {}", l.path.empty() ? "path unknown (no NVML)" : l.path, l.peer_access ? "yes" : "no"));
  row("CPU", m.cpu_model);
  row("CPU cores", std::to_string(m.cpu_cores));
  row("intra-op threads", std::to_string(m.default_threads));
}

}  // namespace gputrain
