// `gputrain benchmark --save_recipe [NAME]`: the measured winner written as a device preset of
// this machine, which `--device_preset auto` then prefers (config/measured_preset.h).
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "bench/report.h"

namespace gputrain {

// The file NAME is written to ("" for the default "<built-in recipe>-measured"), its folder made.
// Throws a usage error for a name that is not a plain file name, that would hide a preset
// gputrain ships or replace one that is not a measured recipe, or a folder that cannot be written.
std::string recipe_path(const std::string& name, const std::string& builtin);

// The winner: by median time to the target with --until, else by samples/s among the variants
// whose loss did not drift (runner.h's fastest). Writes the preset to `path` and returns a line
// saying what it is; "" (nothing written) when no variant qualifies.
std::string save_recipe(const BenchReport& report, const std::string& path, const nlohmann::json& fingerprint,
                        const std::string& builtin);

}  // namespace gputrain
