// GPU pairs: CUDA's peer access, and NVML's view of the path (NVML is dlopen'd: a machine
// without the driver's library still answers, with the path unknown).
#include "core/gpu_topology.h"

#include <dlfcn.h>

#include <cstdlib>

#include "core/device_cuda.h"

namespace gputrain {
namespace {

// NVML's C ABI: return 0 is success; these enum values are fixed by nvml.h.
constexpr int kP2pCapsNvlink = 2, kP2pStatusOk = 0;
constexpr int kTopologyInternal = 0, kTopologySingle = 10, kTopologyMultiple = 20, kTopologyHostBridge = 30,
              kTopologyNode = 40;

std::string level_name(int level) {
  if (level == kTopologyInternal) return "same board";
  if (level == kTopologySingle) return "one PCIe switch";
  if (level == kTopologyMultiple) return "several PCIe switches";
  if (level == kTopologyHostBridge) return "PCIe host bridge";
  if (level == kTopologyNode) return "PCIe across host bridges";
  return "across CPU sockets";
}

}  // namespace

std::vector<GpuLink> gpu_links(int gpus) {
  std::vector<GpuLink> links;
  for (int a = 0; a < gpus; ++a)
    for (int b = a + 1; b < gpus; ++b) links.push_back({a, b, cuda_can_access_peer(a, b) && cuda_can_access_peer(b, a), ""});
  if (links.empty()) return links;

  const char* env = std::getenv("GPUTRAIN_NVML_LIBRARY");
  void* nvml = dlopen(env && *env ? env : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml) return links;
  auto init = reinterpret_cast<int (*)()>(dlsym(nvml, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<int (*)()>(dlsym(nvml, "nvmlShutdown"));
  auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto ancestor = reinterpret_cast<int (*)(void*, void*, int*)>(dlsym(nvml, "nvmlDeviceGetTopologyCommonAncestor"));
  auto p2p = reinterpret_cast<int (*)(void*, void*, int, int*)>(dlsym(nvml, "nvmlDeviceGetP2PStatus"));
  if (init && by_bus && init() == 0) {
    std::vector<void*> handle(static_cast<size_t>(gpus), nullptr);
    for (int i = 0; i < gpus; ++i) {
      const std::string bus = cuda_pci_bus_id(i);
      if (!bus.empty()) by_bus(bus.c_str(), &handle[static_cast<size_t>(i)]);
    }
    for (auto& link : links) {
      void* x = handle[static_cast<size_t>(link.a)];
      void* y = handle[static_cast<size_t>(link.b)];
      if (!x || !y) continue;
      int status = -1, level = -1;
      if (p2p && p2p(x, y, kP2pCapsNvlink, &status) == 0 && status == kP2pStatusOk)
        link.path = "NVLink";
      else if (ancestor && ancestor(x, y, &level) == 0)
        link.path = level_name(level);
    }
    if (shutdown) shutdown();
  }
  dlclose(nvml);
  return links;
}

}  // namespace gputrain
