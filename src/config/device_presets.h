// Device presets: the speed recipe for one kind of machine (presets with "kind": "device",
// t4.json ... h100.json, cpu.json), kept apart from the workload (model, data, epochs) so that
// `--preset quickstart` on a T4 gets the quickstart's workload and the T4's recipe.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/device_probe.h"

namespace gputrain {

// The GPUs torch sees (core's probe_machine), asked only when --device_preset is auto.
using GpuProbe = std::function<std::vector<GpuInfo>()>;

struct DevicePresetChoice {
  std::string name;  // a preset name: t4, l4, a10, rtx3090, a100, h100 or cpu
  std::string why;   // "Tesla T4 (sm_75, 15 GiB)", "no CUDA device", ...
};

// The recipe for the GPU `device` names (auto/cuda: the first GPU torch has kernels for, as the
// GPUs of one machine are nearly always one model; cuda:N: that one; cpu: the CPU): by name for
// the GPUs the presets were written for, else by compute capability and memory.
DevicePresetChoice choose_device_preset(const std::vector<GpuInfo>& gpus, const std::string& device);

}  // namespace gputrain
