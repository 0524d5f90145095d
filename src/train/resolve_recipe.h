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

// The AMP fallback, when mixed precision failed `why` (the numeric check, or a collapsed loss
// scale): fp16 -> bf16 where the device has it -> fp32. Changes the recipe's precision and its
// AMP row and records the decision in `rc`. Returns what it chose: "bf16" or "fp32".
std::string fall_back_precision(ResolvedConfig& rc, Recipe& r, const MachineInfo& machine, const std::string& why);

}  // namespace gputrain
