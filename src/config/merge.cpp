// Merges a Config: built-in defaults < --preset < --config file < command-line flags.
#include "config/merge.h"

#include <optional>
#include <tuple>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "config/fields.h"
#include "config/presets.h"
#include "config/validate.h"
#include "core/error.h"
#include "core/text.h"

namespace gputrain {

namespace {

// Applies the flags over `c` (source flags excepted), then the range checks; throws with every
// problem, including those already in `problems`.
Config finish(Config c, const std::vector<FlagArg>& flags, std::vector<std::string> problems, bool resuming) {
  const Config sources = c;
  for (const auto& f : flags) {
    const Field* field = find_field(f.name);
    if (!field) {
      problems.push_back("unknown flag '" + f.raw + "'" + did_you_mean(f.name, config_field_names()));
      continue;
    }
    if (field->group == "source") {
      // Resuming, the checkpoint holds the configuration: repeating the original command's
      // --preset/--config/--device_preset is fine, naming different ones is a mistake.
      const std::string& saved = f.name == "preset"   ? sources.preset
                                 : f.name == "config" ? sources.config
                                                      : sources.device_preset;
      const bool same = f.value && (*f.value == saved || (f.name == "device_preset" && *f.value == "auto"));
      if (resuming && f.value && !same)
        problems.push_back("flag " + f.raw + " '" + *f.value + "' differs from the resumed run's '" + saved + "'");
      else if (!f.value || f.value->empty())
        problems.push_back("flag " + f.raw + " needs a value");
      continue;
    }
    set_field_flag(c, *field, f.value, f.negated, problems);
  }
  // The optimizer's parameter groups follow the learning-rate shares, and a checkpoint's optimizer
  // state only loads into the same groups.
  if (resuming)
    for (const auto& [name, was, now] : {std::tuple{"layer_decay", sources.layer_decay, c.layer_decay},
                                         std::tuple{"backbone_lr_scale", sources.backbone_lr_scale, c.backbone_lr_scale}})
      if (was != now)
        problems.push_back(fmt::format("--{} {:g} differs from the resumed run's {:g}: its optimizer's parameter groups "
                                       "are fixed (start a new run with --init_from the checkpoint instead)",
                                       name, now, was));
  // Range and choice checks run even after type errors, so one run reports everything.
  auto more = config_problems(c);
  problems.insert(problems.end(), more.begin(), more.end());
  // A TorchScript module is a program: loading it runs its code (a __setstate__, say). Only the
  // flag on this command line lets it in; files never give it (apply_json, and a resumed run's
  // record is read without it), so eval, infer and --resume of such a run ask again.
  if (is_script_file(c.model) && !c.trust_program) {
    const std::string line =
        c.model + " is a TorchScript program: its code runs when it is loaded, so --model takes it only with --trust_program";
    if (problems.empty())
      throw usage_error(line, "pass --trust_program if you trust its author, or export the module with torch.export to " +
                                  c.model + "2 (tools/export_model.py), which gputrain runs as data");
    problems.push_back(line);
  }
  if (!problems.empty())
    throw Error(problems, "gputrain train --help lists every flag; gputrain presets lists presets", kExitUsage);
  return c;
}

}  // namespace

Config resolve_config(const std::vector<FlagArg>& flags, const GpuProbe& probe, const FingerprintProbe& fingerprint) {
  std::vector<std::string> problems;
  Config c;

  // The sources come first, whatever their position on the command line; --device too, as it
  // names the GPU an automatic device preset is for.
  bool device_preset_given = false;
  for (const auto& f : flags) {
    if (f.negated || !f.value || f.value->empty()) continue;
    if (f.name == "preset") c.preset = *f.value;
    if (f.name == "config") c.config = *f.value;
    if (f.name == "device_preset") {
      c.device_preset = *f.value;
      device_preset_given = true;
    }
  }
  auto load = [&](const std::string& name) -> nlohmann::json {
    try {
      const std::string path = find_preset(name);
      return nlohmann::json{{"path", path}, {"values", load_json_file(path)}};
    } catch (const Error& e) {
      problems.insert(problems.end(), e.problems.begin(), e.problems.end());
      return nullptr;
    }
  };
  auto apply = [&](const nlohmann::json& preset) {
    if (preset.is_null()) return;
    apply_json(c, preset["values"], preset["path"], problems, {"description", "kind", "measured"});
  };
  auto is_device = [](const nlohmann::json& preset) { return !preset.is_null() && is_device_recipe(preset["values"]); };
  nlohmann::json config_file;
  if (!c.config.empty()) {
    try {
      config_file = load_json_file(c.config);
    } catch (const Error& e) {
      problems.insert(problems.end(), e.problems.begin(), e.problems.end());
    }
  }

  // --preset auto: the built-in workload under the recipe for the GPU found.
  const bool preset_auto = c.preset == "auto";
  if (preset_auto && c.device_preset != "auto")
    problems.push_back("--preset auto picks the device preset itself: drop --device_preset '" + c.device_preset + "'");
  nlohmann::json workload = load(preset_auto ? Config{}.preset : c.preset);
  nlohmann::json recipe;
  bool sealed_checked = false;  // a measured recipe picked by auto was checked while picking
  if (is_device(workload)) {
    // --preset t4: the T4's recipe, the built-in workload.
    if (device_preset_given && c.device_preset != "auto" && c.device_preset != c.preset)
      problems.push_back("--preset '" + c.preset + "' is a device recipe: drop --device_preset '" + c.device_preset +
                         "', or name a workload preset");
    recipe = std::move(workload);
    workload = nullptr;
    c.device_preset = c.preset;
  } else if (c.device_preset == "auto") {
    // A string the run will have, wherever it is set (the last flag > --config file > workload >
    // the default), before any of them is applied.
    auto planned = [&](const std::string& name, const std::string& fallback) {
      std::string value;
      for (const auto& f : flags)
        if (f.name == name && !f.negated && f.value && !f.value->empty()) value = *f.value;
      for (const nlohmann::json* values : {&config_file, workload.is_null() ? nullptr : &workload["values"]})
        if (value.empty() && values && values->is_object() && values->contains(name) && (*values)[name].is_string())
          value = (*values)[name];
      return value.empty() ? fallback : value;
    };
    // Not probed for the CPU: the GPU query makes a CUDA context on every GPU.
    const std::string device = planned("device", c.device);
    const bool ask = probe && device != "cpu";
    const std::vector<GpuInfo> gpus = ask ? probe() : std::vector<GpuInfo>{};
    const DevicePresetChoice choice = choose_device_preset(gpus, device);
    // A recipe measured on this machine (the same GPUs, driver, CPU and cores) for this workload
    // (its model and data) over the built-in one.
    std::optional<MeasuredPick> measured;
    std::string note;
    if (fingerprint)
      measured = pick_measured(fingerprint(choice.name == "cpu" ? std::vector<GpuInfo>{} : gpus),
                               {planned("model", c.model), planned("dataset", c.dataset)}, note, problems);
    if (measured) {
      recipe = {{"path", measured->path}, {"values", measured->values}};
      c.device_preset = measured->name;
      c.device_preset_why = measured->why;
      sealed_checked = true;
    } else {
      recipe = load(choice.name);
      c.device_preset = choice.name;
      c.device_preset_why = note.empty() ? choice.why : choice.why + "; " + note;
    }
  } else if (c.device_preset != "none") {
    recipe = load(c.device_preset);
    if (!recipe.is_null() && !is_device(recipe)) {
      std::vector<std::string> names{"auto", "none"};
      for (const auto& p : list_presets())
        if (p.device) names.push_back(p.name);
      problems.push_back("--device_preset '" + c.device_preset + "' is a workload preset, not a device recipe (" +
                         join(names, ", ") + ")");
    }
  }
  // A measured preset named outright is checked as one chosen by auto is.
  if (!recipe.is_null() && is_measured(recipe["values"]) && !sealed_checked)
    check_sealed(recipe["values"], recipe["path"], problems);
  apply(recipe);
  // The CPU's recipe named outright (--preset cpu, --device_preset cpu) means training on the
  // CPU, also on a machine with GPUs; chosen by auto it is where no GPU can be used anyway.
  if (c.device_preset == "cpu" && c.device_preset_why.empty()) c.device = "cpu";
  apply(workload);
  // On the workload it was measured on, a measured recipe is what ran: its switches win over the
  // workload's own (quickstart sets loader threads), and its batch size applies; a --config file
  // and flags still win over both.
  if (!recipe.is_null() && is_measured(recipe["values"])) {
    const auto& m = recipe["values"]["measured"];
    const auto w = m.value("workload", nlohmann::json::object());
    if (w.value("model", "") == c.model && w.value("dataset", "") == c.dataset) {
      apply(recipe);
      if (m.contains("batch_size") && m["batch_size"].is_number_integer()) c.batch_size = m["batch_size"];
    }
  }
  if (!config_file.is_null()) {
    try {
      apply_json(c, config_file, c.config, problems, {});
    } catch (const Error& e) {
      problems.insert(problems.end(), e.problems.begin(), e.problems.end());
    }
  }
  return finish(c, flags, problems, false);
}

Config resolve_resumed_config(const nlohmann::json& saved, const std::vector<FlagArg>& flags) {
  std::vector<std::string> problems;
  Config c;
  // trust_program: this command's to give, not the record's (finish()). profile: a range of
  // steps the stopped process recorded, not one to record again on every resume.
  apply_json(c, saved, "the checkpoint's configuration", problems,
             {"preset", "config", "device_preset", "trust_program", "profile"});
  c.preset = saved.value("preset", c.preset);
  c.config = saved.value("config", c.config);
  // A run from before device presets: its recipe is in its values, none to apply.
  c.device_preset = saved.value("device_preset", std::string("none"));
  return finish(c, flags, problems, true);
}

}  // namespace gputrain
