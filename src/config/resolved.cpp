// The requested and resolved configurations of a run, and the record that stores both.
#include "config/resolved.h"

#include <algorithm>
#include <stdexcept>

#include "config/fields.h"

namespace gputrain {

namespace {

// Decisions come from code, not users: a wrong name or type is a bug.
const Field& set_field(Config& c, const std::string& field, const nlohmann::json& value) {
  const Field* f = find_field(field);
  if (!f) throw std::logic_error("no config field '" + field + "'");
  std::vector<std::string> problems;
  set_field_json(c, *f, value, "resolved config", problems);
  if (!problems.empty()) throw std::logic_error(problems.front());
  return *f;
}

}  // namespace

void ResolvedConfig::decide(const std::string& field, const nlohmann::json& value, const std::string& why) {
  const Field& f = set_field(resolved, field, value);
  std::erase(not_applicable_, f.name);
  for (auto& [name, text] : reasons)
    if (name == f.name) {
      text = why;
      return;
    }
  reasons.emplace_back(f.name, why);
}

void ResolvedConfig::not_applicable(const std::string& field, const std::string& why) {
  decide(field, find_field(field) ? find_field(field)->get(resolved) : nlohmann::json(), why);
  not_applicable_.push_back(field);
}

void ResolvedConfig::record(const Decisions& decisions) {
  for (const auto& d : decisions) {
    if (d.not_applicable)
      not_applicable(d.field, d.reason);
    else
      decide(d.field, d.value, d.reason);
  }
}

bool ResolvedConfig::is_not_applicable(const std::string& field) const {
  return std::find(not_applicable_.begin(), not_applicable_.end(), field) != not_applicable_.end();
}

nlohmann::json ResolvedConfig::resolved_json() const {
  auto j = to_json(resolved);
  for (const auto& name : not_applicable_) j[name] = kNotApplicable;
  return j;
}

std::string ResolvedConfig::reason(const std::string& field) const {
  for (const auto& [name, text] : reasons)
    if (name == field) return text;
  return "";
}

nlohmann::json config_record(const ResolvedConfig& r) {
  nlohmann::json why = nlohmann::json::object();
  for (const auto& [name, text] : r.reasons) why[name] = text;
  return {{"requested", to_json(r.requested)}, {"resolved", r.resolved_json()}, {"reasons", why}};
}

StoredConfig read_config_record(const nlohmann::json& record) {
  StoredConfig stored = record.is_object() && record.contains("requested") && record.contains("resolved")
                            ? StoredConfig{record["requested"], record["resolved"]}
                            : StoredConfig{record, record};
  // Records from before --num_classes applied to every dataset hold its old default, 10, which
  // only synthetic data used: for other data it was never a choice. (A classifier's count is
  // pinned from the resolved half; a regression run has none.)
  for (auto* half : {&stored.requested, &stored.resolved})
    if (half->is_object() && half->value("dataset", "") != "synthetic" && half->value("num_classes", 0) == 10 &&
        (half == &stored.requested || half->value("task", "") == "regression"))
      (*half)["num_classes"] = 0;
  return stored;
}

int64_t record_global_batch(const nlohmann::json& record) {
  if (!record.is_object()) return 0;
  if (record.contains("global_batch_size")) return record["global_batch_size"].get<int64_t>();
  const auto resolved = read_config_record(record).resolved;
  const int64_t batch = resolved.is_object() ? resolved.value("batch_size", int64_t{0}) : 0;
  return batch * record.value("world_size", int64_t{1});
}

}  // namespace gputrain
