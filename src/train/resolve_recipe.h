// The recipe resolver: a Config and what the machine has -> the device and every speed switch,
// each with its reason. Pure (it sets nothing in torch), so benchmark variants and tests call it
// with any config and any machine, a T4 or an H100 included.
#pragma once
#include "config/resolved.h"
#include "core/device_probe.h"
#include "core/recipe.h"

namespace gputrain {

// Decides from `rc.resolved` and records each decision (device, use_amp, amp_dtype, threads,
// cudnn_benchmark, tf32, channels_last, pin_memory, non_blocking) in `rc`. Throws a usage error when
// the config asks for a device that is not there.
Recipe resolve_recipe(ResolvedConfig& rc, const MachineInfo& machine);

}  // namespace gputrain
