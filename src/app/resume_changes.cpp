// Resume changes: flags, data and step position, compared and said.
#include "app/resume_changes.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {
namespace {

std::string shown(const nlohmann::json& v) {
  if (v.is_null()) return "(none)";
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  return s.empty() ? "\"\"" : s;
}

}  // namespace

nlohmann::json ResumeChanges::entry(const CheckpointMeta& at) const {
  if (kept.empty()) return nullptr;
  nlohmann::json e = {{"step", at.step}, {"epoch", at.epoch}};
  e.update(kept);
  return e;
}

void compare_flags(const nlohmann::json& was, const nlohmann::json& now, ResumeChanges& out, const std::string& skip) {
  if (!was.is_object() || !now.is_object()) return;
  // Not settings of the run: where it is written, and switches of this command alone (a
  // --profile range is this process's to record).
  static const char* const kNotSettings[] = {"output_dir", "resume", "allow_data_change", "trust_program",
                                             "device_preset_why", "profile"};
  for (const auto& [name, value] : now.items()) {
    if (name == skip || std::find(std::begin(kNotSettings), std::end(kNotSettings), name) != std::end(kNotSettings))
      continue;
    const nlohmann::json before = was.contains(name) ? was[name] : nlohmann::json();
    if (before == value) continue;
    out.said.push_back(fmt::format("--{} {} -> {}", name, shown(before), shown(value)));
    out.kept["flags"][name] = {{"from", before}, {"to", value}};
  }
}

void compare_data(const nlohmann::json& was, const nlohmann::json& now, bool allow, const std::string& checkpoint,
                  ResumeChanges& out) {
  if (!was.is_object() || !now.is_object()) return;  // a run from before data fingerprints
  const auto samples_was = was.value("train_samples", int64_t{-1}), samples_now = now.value("train_samples", int64_t{-1});
  if (samples_was != samples_now) {
    if (!allow)
      throw usage_error(fmt::format("the training data has {} samples; checkpoint '{}' was trained on {}", samples_now,
                                    checkpoint, samples_was),
                        "resume on the run's own data, or pass --allow_data_change to go on from its position (its "
                        "epochs' sample orders change)");
    out.said.push_back(fmt::format("training samples {} -> {} (--allow_data_change)", samples_was, samples_now));
    out.kept["data"]["train_samples"] = {{"from", samples_was}, {"to", samples_now}};
  }
  const nlohmann::json empty = nlohmann::json::object();
  const auto& files_was = was.contains("files") ? was["files"] : empty;
  const auto& files_now = now.contains("files") ? now["files"] : empty;
  auto said_file = [&](const std::string& path, const std::string& how) {
    out.said.push_back(fmt::format("data file {} {}", path, how));
    out.kept["data"]["files"][path] = how;
  };
  for (const auto& [path, before] : files_was.items()) {
    if (!files_now.contains(path)) {
      said_file(path, "is no longer read");
      continue;
    }
    const auto& after = files_now[path];
    if (before.value("bytes", uint64_t{0}) != after.value("bytes", uint64_t{0}))
      said_file(path, fmt::format("changed: {} -> {} bytes", before.value("bytes", uint64_t{0}), after.value("bytes", uint64_t{0})));
    else if (before.value("crc32_ends", "") != after.value("crc32_ends", ""))
      said_file(path, "changed: same size, other bytes");
    else if (before.value("mtime", int64_t{0}) != after.value("mtime", int64_t{0}))
      said_file(path, "was modified (same size and ends)");
  }
  for (const auto& [path, after] : files_now.items())
    if (!files_was.contains(path)) said_file(path, "is new");
}

void compare_schema(const nlohmann::json& was, const nlohmann::json& now, ResumeChanges& out) {
  if (!was.is_object() || was == now) return;  // (a run from before schemas has none)
  for (const auto& [name, field] : now.items())
    if (!was.contains(name) || was[name] != field)
      out.said.push_back(fmt::format("sample field {} {} -> {}", name, was.contains(name) ? was[name].dump() : "(none)",
                                     field.dump()));
  for (const auto& [name, field] : was.items())
    if (!now.contains(name)) out.said.push_back(fmt::format("sample field {} {} -> (none)", name, field.dump()));
  out.kept["schema"] = {{"from", was}, {"to", now}};
}

void recount_steps(const StepGeometry& now, int64_t was_per_step, CheckpointMeta& at, ResumeChanges& out) {
  if (now.steps_per_epoch <= 0 || now.global_batch <= 0) return;
  const int64_t first = first_global_batch(at.samples, now.global_batch);
  const int64_t left = std::max<int64_t>(now.micro_batches_per_epoch - first, 0) / now.accumulation;
  const int64_t step = at.epoch * now.steps_per_epoch + std::max<int64_t>(now.steps_per_epoch - left, 0);
  if (step == at.step) return;
  const std::string why = was_per_step > 0 && was_per_step != now.samples_per_step()
                              ? fmt::format("{} -> {} samples per step", was_per_step, now.samples_per_step())
                              : fmt::format("{} steps per epoch now", now.steps_per_epoch);
  out.said.push_back(fmt::format("{}: step {} -> {}, counted from the position in the epoch, so the epochs and the "
                                 "learning-rate schedule end together",
                                 why, at.step, step));
  out.kept["steps"] = {{"from", at.step}, {"to", step}, {"samples_per_step", now.samples_per_step()},
                       {"steps_per_epoch", now.steps_per_epoch}};
  at.step = step;
}

}  // namespace gputrain
