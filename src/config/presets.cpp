// Presets: named JSON settings in presets/*.json, found in the source tree or the install.
#include "config/presets.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/json_text.h"
#include "core/error.h"
#include "core/install_dirs.h"
#include "core/text.h"

namespace fs = std::filesystem;

namespace gputrain {

std::string user_presets_dir() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return std::string(xdg) + "/gputrain/presets";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.config/gputrain/presets";
  return "";
}

std::vector<std::string> preset_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("GPUTRAIN_PRESETS_DIR")) dirs.push_back(env);
  // The user's own, where benchmark --save_recipe writes the recipes measured on this machine.
  if (const std::string mine = user_presets_dir(); !mine.empty()) dirs.push_back(mine);
  // An install's share folder, then the source tree's (a binary in build/ beside presets/).
  if (const std::string exe = exe_dir(); !exe.empty()) {
    dirs.push_back(installed_share_dir() + "/presets");
    dirs.push_back((fs::path(exe) / "../presets").lexically_normal());
  }
  dirs.push_back(std::string(GPUTRAIN_SOURCE_DIR) + "/presets");
  dirs.push_back(std::string(GPUTRAIN_INSTALL_DATADIR) + "/presets");
  return dirs;
}

nlohmann::json load_json_file(const std::string& path) {
  // Settings are kilobytes: what goes on far longer is no config (--config /dev/zero was read
  // until the memory ran out). Read to that bound, so a pipe (--config <(jq ...)) still works.
  constexpr size_t kMaxBytes = 16u << 20;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw usage_error("'" + path + "' is a folder", "a preset or --config is a .json file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error("cannot read '" + path + "' (no such file, or not readable)");
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxBytes)
    throw usage_error(fmt::format("'{}' holds more than {} bytes: too large for a file of settings", path, kMaxBytes),
                      "a preset or --config is a .json file of settings");
  return parse_json_text(text, path);
}

std::vector<PresetInfo> list_presets() {
  std::map<std::string, PresetInfo> found;
  for (const auto& dir : preset_dirs()) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      // Only files: a pipe named *.json would block the listing.
      if (entry.path().extension() != ".json" || !entry.is_regular_file(ec)) continue;
      std::string name = entry.path().stem();
      if (found.count(name)) continue;
      PresetInfo info{name, entry.path().string(), ""};
      try {
        auto j = load_json_file(info.path);
        if (j.is_object() && j.contains("description") && j["description"].is_string())
          info.description = j["description"];
        info.device = is_device_recipe(j);
      } catch (const Error&) {
        info.description = "(unreadable: not valid JSON)";
      }
      found[name] = info;
    }
  }
  std::vector<PresetInfo> out;
  for (auto& [name, info] : found) out.push_back(info);
  return out;
}

bool is_device_recipe(const nlohmann::json& values) {
  if (!values.is_object()) return false;
  const auto kind = values.find("kind");
  return kind != values.end() && kind->is_string() && *kind == "device";
}

std::string find_preset(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json")) {
    if (!fs::exists(name_or_path)) throw usage_error("preset file '" + name_or_path + "' does not exist");
    return name_or_path;
  }
  std::vector<std::string> names;
  for (const auto& p : list_presets()) {
    if (p.name == name_or_path) return p.path;
    names.push_back(p.name);
  }
  throw usage_error("unknown preset '" + name_or_path + "'" + did_you_mean(name_or_path, names),
                    names.empty() ? "no presets found; set GPUTRAIN_PRESETS_DIR to the presets/ folder"
                                  : "gputrain presets lists them: " + join(names, ", "));
}

}  // namespace gputrain
