// The measured winner as a device preset.
#include "bench/save_recipe.h"

#include <filesystem>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/measured_preset.h"
#include "config/presets.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/text.h"
#include "weights/safetensors.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

const VariantResult* find(const BenchReport& r, const std::string& name) {
  for (const auto& v : r.results)
    if (v.name == name && v.skipped.empty()) return &v;
  return nullptr;
}

// How many times better `a` is than `b`: in time to the target, or in samples/s.
double gain(const BenchReport& r, const VariantResult& a, const VariantResult& b) {
  if (r.settings.until)
    return b.target && b.target->reached ? b.target->seconds / a.target->seconds : 0;
  return b.samples_per_sec > 0 ? a.samples_per_sec / b.samples_per_sec : 0;
}

}  // namespace

std::string recipe_path(const std::string& name, const std::string& builtin) {
  const std::string file = name.empty() ? builtin + "-measured" : name;
  if (!std::regex_match(file, std::regex("[A-Za-z0-9][A-Za-z0-9._-]*")) || file.ends_with(".json"))
    throw usage_error("--save_recipe '" + name + "' is not a preset name", "letters, digits, '.', '_' and '-', e.g. --save_recipe my-a100");
  const std::string dir = user_presets_dir();
  if (dir.empty()) throw usage_error("--save_recipe: no per-user folder to write to", "set XDG_CONFIG_HOME or HOME");
  for (const auto& p : list_presets())
    if (p.name == file && fs::path(p.path).parent_path() != fs::path(dir))
      throw usage_error(fmt::format("--save_recipe '{}' would hide the preset {}", file, p.path), "choose another name");
  const std::string path = dir + "/" + file + ".json";
  // A measured recipe is replaced by a new measurement; a preset of the user's own is not.
  std::error_code ec;
  if (fs::exists(path, ec)) {
    bool measured = false;
    try {
      measured = is_measured(load_json_file(path));
    } catch (const Error&) {
    }
    if (!measured)
      throw usage_error("--save_recipe: " + path + " exists and is not a measured recipe", "choose another name");
  }
  // The folder now, so that a run of many minutes does not end in a folder it cannot write.
  fs::create_directories(dir, ec);
  if (ec) throw usage_error(fmt::format("--save_recipe: cannot create {} ({})", dir, ec.message()), "set XDG_CONFIG_HOME to a writable folder");
  check_writable(path, "--save_recipe");
  return path;
}

std::string save_recipe(const BenchReport& r, const std::string& path, const nlohmann::json& fingerprint,
                        const std::string& builtin) {
  const VariantResult* win = fastest(r.results);
  if (!win) return "";
  const std::string by = r.settings.until ? "in time to " + r.settings.until->text() : "in samples/s";
  // The built-in recipe is what "all" measures (train's defaults for this machine).
  std::string summary;
  if (const VariantResult* all = find(r, "all"); all && win != all)
    summary = fmt::format("{:.2f}x the built-in recipe {} ({} over all)", gain(r, *win, *all), by, win->name);
  else if (all)
    summary = fmt::format("the built-in recipe (all) was the fastest {}", by);
  else
    summary = fmt::format("{:.2f}x the baseline {} ({}; all was not measured)", gain(r, *win, r.results.front()), by,
                          win->name);

  const Config& c = win->config;  // as the variant's Session resolved it
  nlohmann::json figures = {{"samples_per_sec", win->samples_per_sec}};
  if (win->target)
    figures.update({{"seconds_to_target", win->target->seconds},
                    {"worst_seconds", win->target->worst_seconds},
                    {"steps", win->target->steps},
                    {"epochs", win->target->epochs},
                    {"final_metric", win->target->metric},
                    {"seeds", win->target->runs.size()}});
  const std::string date = utc_now();
  nlohmann::json preset = {
      {"description", fmt::format("measured by gputrain benchmark on {}: {}", date.substr(0, 10), summary)},
      {"kind", "device"},
      {"use_amp", c.use_amp},
      {"amp_dtype", c.amp_dtype},
      {"cudnn_benchmark", c.cudnn_benchmark},
      {"tf32", c.tf32},
      {"channels_last", c.channels_last},
      {"fused_optimizer", c.fused_optimizer},
      {"cuda_graphs", c.cuda_graphs},
      {"num_workers", c.num_workers},
      {"prefetch_factor", c.prefetch_factor},
      {"pin_memory", c.pin_memory},
      {"non_blocking", c.non_blocking},
      {"measured",
       {{"variant", win->name},
        {"by", by},
        {"summary", summary},
        {"figures", figures},
        // The batch size is the workload's business: it applies to the workload measured here only.
        {"batch_size", c.batch_size},
        {"workload",
         {{"preset", (*r.workload).value("preset", "")},
          {"model", c.model},
          {"dataset", c.dataset},
          {"batch_size", (*r.workload).value("batch_size", int64_t{0})}}},
        {"builtin", builtin},
        {"date", date},
        {"gputrain_version", GPUTRAIN_VERSION},
        {"fingerprint", fingerprint}}}};
  seal(preset);
  write_file_atomically(path, preset.dump(2) + "\n");
  return fmt::format("saved the measured recipe '{}' ({}: {}) to {}; gputrain train on this machine prefers it "
                     "(--device_preset auto)",
                     fs::path(path).stem().string(), win->name, summary, path);
}

}  // namespace gputrain
