// A run's two configurations: the *requested* one (what the user asked, "auto" kept, so a resume
// can decide again on other hardware) and the *resolved* one (what this run uses), with the
// reason for every value that was decided rather than given.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace gputrain {

// A value decided by a part of the Session that returns its decisions for the Session to record
// (train/parallelism's plan): a field set with its reason, or marked n/a with it.
struct Decision {
  std::string field;
  nlohmann::json value;  // null for n/a
  std::string reason;
  bool not_applicable = false;
};
using Decisions = std::vector<Decision>;

struct ResolvedConfig {
  Config requested;
  Config resolved;
  // (field, reason) for each decided value, in the order they were decided.
  std::vector<std::pair<std::string, std::string>> reasons;

  explicit ResolvedConfig(const Config& c = {}) : requested(c), resolved(c) {}

  // Sets a field of `resolved` by its field-table name and records why (a later decision of the
  // same field replaces the earlier reason).
  void decide(const std::string& field, const nlohmann::json& value, const std::string& reason);
  // A field this run does not use (amp_dtype with AMP off, stem for an MLP): it reads "n/a" in
  // every record and table, with `reason`, and keeps its requested value inside the Config.
  void not_applicable(const std::string& field, const std::string& reason);
  bool is_not_applicable(const std::string& field) const;
  // Records `decisions` in order, as decide() and not_applicable() would.
  void record(const Decisions& decisions);
  // The reason a field was decided, or "" when it kept its requested value untouched.
  std::string reason(const std::string& field) const;
  // The resolved half as records and tables show it: n/a where a field does not apply.
  nlohmann::json resolved_json() const;

 private:
  std::vector<std::string> not_applicable_;
};

// What a resolved value that does not apply reads as.
inline constexpr const char* kNotApplicable = "n/a";

// {"requested": {...}, "resolved": {...}, "reasons": {field: reason}}: config.json and every
// checkpoint hold this record.
nlohmann::json config_record(const ResolvedConfig& r);

// The two halves of a stored record. A record written before there were two (one flat
// configuration, with every value already decided) reads as both.
struct StoredConfig {
  nlohmann::json requested, resolved;
};
StoredConfig read_config_record(const nlohmann::json& record);

// The samples per micro-batch of the run a record describes, over all its ranks (records before
// data parallel hold only the batch size, of their one process); 0 when it says none.
int64_t record_global_batch(const nlohmann::json& record);

}  // namespace gputrain
