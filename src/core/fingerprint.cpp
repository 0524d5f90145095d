// The machine's fingerprint for measured recipes.
#include "core/fingerprint.h"

#include <sched.h>

#include <fstream>
#include <regex>
#include <thread>

#include "core/device_cuda.h"
#include "core/host_info.h"

namespace gputrain {
namespace {

// The kernel module's version ("580.159.04"), which a driver upgrade changes; where /proc does
// not show it (some containers), the CUDA version the driver supports.
std::string driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::smatch m;
  if (in && std::getline(in, line) && std::regex_search(line, m, std::regex(R"(\s(\d+\.\d+(\.\d+)?)\s)")))
    return m[1];
  return "cuda " + cuda_driver_version();
}

// The cores this process may run on: a container's or a Slurm step's share, not the host's
// count, since the best loader threads follow the share.
int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

nlohmann::json machine_fingerprint(const std::vector<GpuInfo>& gpus) {
  nlohmann::json names = nlohmann::json::array();
  for (const auto& g : gpus) names.push_back(g.name);
  return {{"gpus", names},
          {"gpu_count", gpus.size()},
          {"driver", gpus.empty() ? "none" : driver_version()},
          {"cpu_model", cpu_model()},
          {"cpu_cores", usable_cores()}};
}

}  // namespace gputrain
