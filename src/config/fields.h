// The table of configuration fields: one row per flag/JSON key, driving parsing, help and printing.
#pragma once
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/config.h"

namespace gputrain {

struct Field {
  using Member = std::variant<bool Config::*, int64_t Config::*, double Config::*, std::string Config::*>;
  std::string name;
  Member member;
  std::string group;
  std::string help;
  std::vector<std::string> choices;                       // allowed values of a string field; empty = any
  double min = -std::numeric_limits<double>::infinity();  // inclusive range of a number
  double max = std::numeric_limits<double>::infinity();
  bool takes_auto = false;  // an int field that also takes "auto", held as kAuto until decided

  bool is_bool() const { return std::holds_alternative<bool Config::*>(member); }
  std::string type_name() const;  // "bool", "int", "float", "string"
  nlohmann::json get(const Config& c) const;
};

const std::vector<Field>& config_fields();
// The Config as a JSON object, one key per field ("auto" where an int field is left to decide).
nlohmann::json to_json(const Config& c);
// The names --model takes: the model families' (models/family.h), which this torch-free library
// does not link, so the program hands them over at its start (cli/commands.cpp, the tests' main).
// Until then any name passes here, and the model's own lookup refuses an unknown one.
void set_model_choices(std::vector<std::string> names);
// Whether --model `model` names a model file (a torch.export net.pt2, a TorchScript net.pt)
// rather than one of the choices.
bool is_model_file(std::string_view model);
// Whether it names a TorchScript module (net.pt): a program, loaded only with --trust_program.
bool is_script_file(std::string_view model);
std::vector<std::string> config_field_names();

// Finds a field by name; kebab-case is accepted ("batch-size" finds "batch_size").
const Field* find_field(std::string_view name);
std::string normalize_flag_name(std::string_view name);

// Sets a field from a JSON value. Appends a problem (and leaves `c` as it was) on a wrong type.
// `where` names the source for messages, e.g. "presets/t4.json".
void set_field_json(Config& c, const Field& f, const nlohmann::json& value, const std::string& where,
                    std::vector<std::string>& problems);

// Sets a field from a command-line value; `value` is empty for a bare `--flag`.
void set_field_flag(Config& c, const Field& f, const std::optional<std::string>& value, bool negated,
                    std::vector<std::string>& problems);

// Applies every key of a JSON object; unknown keys and wrong types become problems.
// Keys in `skip` (like "description" in presets) are ignored.
void apply_json(Config& c, const nlohmann::json& object, const std::string& where, std::vector<std::string>& problems,
                const std::vector<std::string>& skip = {});

}  // namespace gputrain
