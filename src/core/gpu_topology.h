// How the GPUs of this machine reach each other: what data parallel's all-reduce rides on.
// Peer access comes from CUDA; the path (NVLink, a PCIe switch, the host bridge, across CPU
// sockets) from NVML, found by PCI bus id (CUDA_VISIBLE_DEVICES renumbers GPUs, NVML does not).
#pragma once
#include <string>
#include <vector>

namespace gputrain {

struct GpuLink {
  int a = 0, b = 0;  // CUDA device indices, a < b
  bool peer_access = false;
  std::string path;  // e.g. "NVLink", "PCIe switch", "PCIe host bridge", "across CPU sockets"; "" unknown
};

// Every pair of the `gpus` visible GPUs.
std::vector<GpuLink> gpu_links(int gpus);

}  // namespace gputrain
