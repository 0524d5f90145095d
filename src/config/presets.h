// Presets: named JSON settings in presets/*.json, found in the source tree or the install.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gputrain {

struct PresetInfo {
  std::string name;
  std::string path;
  std::string description;
  bool device = false;  // "kind": "device": a speed recipe (--device_preset), not a workload
};

// $XDG_CONFIG_HOME/gputrain/presets, else $HOME/.config/gputrain/presets ("" without either):
// where benchmark --save_recipe writes the measured presets (config/measured_preset.h).
std::string user_presets_dir();

// Folders searched for presets, in order: $GPUTRAIN_PRESETS_DIR, the user's folder
// ($XDG_CONFIG_HOME/gputrain/presets), the install's, the source tree's.
std::vector<std::string> preset_dirs();

// Every preset found, by name (the first folder wins when two hold the same name).
std::vector<PresetInfo> list_presets();

// A preset name or a path to a .json file -> the file's path. Throws a usage error.
std::string find_preset(const std::string& name_or_path);

// Whether a preset's values are a device recipe ("kind": "device"); any other kind, or none, is
// a workload.
bool is_device_recipe(const nlohmann::json& values);

// Reads and parses a JSON file; throws a usage error naming the file, line and reason.
nlohmann::json load_json_file(const std::string& path);

}  // namespace gputrain
