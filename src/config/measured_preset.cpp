// Measured device presets: where they live, their seal, and the one that fits this machine.
#include "config/measured_preset.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "config/presets.h"
#include "core/error.h"
#include "core/text.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

// CRC-32 of the preset's canonical text without its checksum (nlohmann's dump sorts keys and
// round-trips numbers): a change of layout keeps it, a change of any value does not.
std::string checksum(nlohmann::json preset) {
  preset["measured"].erase("checksum");
  const std::string text = preset.dump();
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size()));
  return fmt::format("crc32:{:08x}", crc);
}

// The fields of two fingerprints that differ, as "cpu_cores 2 -> 1".
std::vector<std::string> changes(const nlohmann::json& was, const nlohmann::json& now) {
  std::vector<std::string> out;
  for (const auto& [key, value] : now.items()) {
    const auto old = was.find(key);
    if (old == was.end())
      out.push_back(key + " not recorded");
    else if (*old != value)
      out.push_back(fmt::format("{} {} -> {}", key, old->dump(), value.dump()));
  }
  return out;
}

}  // namespace

bool is_measured(const nlohmann::json& values) { return values.is_object() && values.contains("measured"); }

void seal(nlohmann::json& preset) { preset["measured"]["checksum"] = checksum(preset); }

void check_sealed(const nlohmann::json& preset, const std::string& path, std::vector<std::string>& problems) {
  const std::string hint = "measure again with gputrain benchmark --save_recipe, or delete it";
  const auto& m = preset["measured"];
  const bool shaped = m.is_object() && m.value("checksum", nlohmann::json()).is_string() &&
                      m.value("fingerprint", nlohmann::json()).is_object() &&
                      m.value("date", nlohmann::json()).is_string() && m.value("summary", nlohmann::json()).is_string();
  if (!shaped) {
    problems.push_back(fmt::format("measured preset '{}' lacks its checksum, fingerprint, date or summary ({})", path, hint));
    return;
  }
  if (m["checksum"] != checksum(preset))
    problems.push_back(fmt::format(
        "measured preset '{}' was edited after it was measured (its checksum does not match); to change a recipe, copy "
        "it under another name without its \"measured\" block, or {}",
        path, hint));
}

std::optional<MeasuredPick> pick_measured(const nlohmann::json& fingerprint, const MeasuredWorkload& workload,
                                         std::string& note, std::vector<std::string>& problems) {
  const std::string dir = user_presets_dir();
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return std::nullopt;
  std::optional<MeasuredPick> best;
  std::vector<std::string> passed_over;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());  // the same pick whatever the directory's order
  for (const auto& path : files) {
    nlohmann::json values;
    try {
      values = load_json_file(path.string());
    } catch (const Error& e) {
      problems.insert(problems.end(), e.problems.begin(), e.problems.end());
      continue;
    }
    if (!is_measured(values)) continue;
    const size_t before = problems.size();
    check_sealed(values, path.string(), problems);
    if (problems.size() != before) continue;
    const auto& m = values["measured"];
    const std::string name = path.stem().string();
    if (const auto diff = changes(m["fingerprint"], fingerprint); !diff.empty()) {
      passed_over.push_back(fmt::format("'{}' is for another machine ({})", name, join(diff, ", ")));
      continue;
    }
    const auto w = m.value("workload", nlohmann::json::object());
    const std::string model = w.value("model", ""), dataset = w.value("dataset", "");
    if (model != workload.model || dataset != workload.dataset) {
      passed_over.push_back(fmt::format("'{}' is for {} on {}", name, model, dataset));
      continue;
    }
    const std::string date = m["date"];
    if (best && date <= best->values["measured"]["date"].get<std::string>()) continue;
    best = MeasuredPick{name, path.string(), fmt::format("measured on this machine on {}: {}", date.substr(0, 10),
                                                         m["summary"].get<std::string>()),
                        values};
  }
  if (!best && !passed_over.empty())
    note = fmt::format("measured preset {}: the built-in recipe", join(passed_over, "; "));
  return best;
}

}  // namespace gputrain
