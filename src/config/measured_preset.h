// Measured device presets: the recipe `gputrain benchmark --save_recipe` found best on one
// machine, with that machine's fingerprint, in the per-user presets folder. --device_preset
// auto prefers one whose fingerprint matches the machine; the measured block is sealed with a
// checksum, so that a figure never describes switches it was not measured with.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device_probe.h"

namespace gputrain {

// The machine's fingerprint for the GPUs a run uses (core/fingerprint.h's machine_fingerprint),
// asked only for --device_preset auto; none (tests) means measured presets are not considered.
using FingerprintProbe = std::function<nlohmann::json(const std::vector<GpuInfo>&)>;

// Whether a preset's values carry a "measured" block.
bool is_measured(const nlohmann::json& values);

// Adds the checksum over the whole preset to its "measured" block.
void seal(nlohmann::json& preset);

// Adds a problem naming `path` when a measured preset is malformed or was edited after it was
// measured (its checksum does not match).
void check_sealed(const nlohmann::json& preset, const std::string& path, std::vector<std::string>& problems);

struct MeasuredPick {
  std::string name, path;
  std::string why;  // the device report's words: "measured on this machine on DATE: ..."
  nlohmann::json values;
};

// What a recipe was measured on: its batch size and switches belong to that workload.
struct MeasuredWorkload {
  std::string model, dataset;
};

// The newest measured preset in user_presets_dir() (config/presets.h) whose fingerprint is
// `fingerprint` and whose workload is `workload` (a recipe measured on another workload, say a
// tiny MLP whose winner was "batch_x2" on the baseline's switches, says nothing of this one).
// When measured presets exist but none fits, `note` says which were passed over and why. A file
// there that cannot be read, or that fails check_sealed, is a problem naming it.
std::optional<MeasuredPick> pick_measured(const nlohmann::json& fingerprint, const MeasuredWorkload& workload,
                                         std::string& note, std::vector<std::string>& problems);

}  // namespace gputrain
