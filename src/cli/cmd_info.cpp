// `gputrain info`: the device query (versions, GPUs, CPU), as text or one JSON object.
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstdio>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/device.h"
#include "core/device_cuda.h"
#include "core/text.h"

namespace gputrain {

int cmd_info(const std::vector<std::string>& words) {
  Args args = parse_args(words, [](const std::string& n) { return n == "json" || n == "help"; });
  if (args.take_switch("help")) {
    std::printf(
        "usage: gputrain info [--json]\n\n"
        "Shows LibTorch, CUDA, cuDNN and NCCL versions, every GPU (memory, compute\n"
        "capability, bf16/TF32 support) and the CPU. --json prints one JSON object.\n");
    return 0;
  }
  bool as_json = args.take_switch("json");
  reject_leftover_flags(args, {"json", "help"});

  nlohmann::json j;
  j["gputrain"] = GPUTRAIN_VERSION;
  j["libtorch"] = TORCH_VERSION;
  j["cuda_build"] = cuda_build_version();
  j["cuda_driver"] = cuda_driver_version();
  j["cudnn"] = cudnn_version();
  j["nccl"] = nccl_version();
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : query_gpus()) {
    j["gpus"].push_back({{"index", g.index},
                         {"name", g.name},
                         {"total_memory_bytes", g.total_bytes},
                         {"free_memory_bytes", g.free_bytes},
                         {"compute_capability", std::to_string(g.major) + "." + std::to_string(g.minor)},
                         {"multiprocessors", g.multiprocessors},
                         {"bf16", g.bf16},
                         {"tf32", g.tf32}});
  }
  j["cpu"] = {{"model", cpu_model()},
              {"cores", std::thread::hardware_concurrency()},
              {"intra_op_threads", at::get_num_threads()}};

  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  auto row = [](const char* k, const std::string& v) { std::printf("%-18s %s\n", k, v.c_str()); };
  row("gputrain", GPUTRAIN_VERSION);
  row("LibTorch", TORCH_VERSION);
  row("CUDA (built)", j["cuda_build"].get<std::string>());
  row("CUDA driver", j["cuda_driver"].get<std::string>());
  row("cuDNN", j["cudnn"].get<std::string>());
  row("NCCL", j["nccl"].get<std::string>());
  if (j["gpus"].empty()) row("GPUs", "none (torch sees no CUDA device)");
  for (const auto& g : j["gpus"]) {
    row(("GPU " + std::to_string(g["index"].get<int>())).c_str(),
        g["name"].get<std::string>() + " | " + format_bytes(g["total_memory_bytes"].get<double>()) + " total, " +
            format_bytes(g["free_memory_bytes"].get<double>()) + " free | cc " +
            g["compute_capability"].get<std::string>() + " | " + std::to_string(g["multiprocessors"].get<int>()) +
            " SMs | bf16 " + (g["bf16"].get<bool>() ? "yes" : "no") + " | TF32 " +
            (g["tf32"].get<bool>() ? "yes" : "no"));
  }
  row("CPU", j["cpu"]["model"].get<std::string>());
  row("CPU cores", std::to_string(j["cpu"]["cores"].get<int>()));
  row("intra-op threads", std::to_string(j["cpu"]["intra_op_threads"].get<int>()));
  return 0;
}

}  // namespace gputrain
