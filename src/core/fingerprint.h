// What a measured recipe was measured on: the GPUs a run uses (names and count), the driver, the
// CPU model and the cores this process may use. A recipe measured on another machine, or after
// a driver change, is not this machine's.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device_probe.h"

namespace gputrain {

// `gpus`: the GPUs the run trains on (empty for a CPU run, whatever the machine has).
nlohmann::json machine_fingerprint(const std::vector<GpuInfo>& gpus);

}  // namespace gputrain
