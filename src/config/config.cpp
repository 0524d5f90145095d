// Validation of a merged Config (every problem at once) and its JSON form.
#include "config/config.h"

#include <cmath>
#include <cstdio>
#include <regex>

#include <nlohmann/json.hpp>

#include "config/fields.h"
#include "core/text.h"

namespace gputrain {

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  std::string cur;
  for (size_t i = 0; i <= text.size(); ++i) {
    char ch = i < text.size() ? text[i] : 'x';
    if (ch == 'x' || ch == ',') {
      if (cur.empty() || cur.size() > 9) return {};
      dims.push_back(std::stoll(cur));
      if (dims.back() < 1) return {};
      cur.clear();
    } else if (ch >= '0' && ch <= '9') {
      cur += ch;
    } else {
      return {};
    }
  }
  return dims;
}

double parse_duration(const std::string& text) {
  if (text.empty()) return -1;
  double total = 0, number = 0;
  bool have_digits = false;
  for (char ch : text) {
    if (ch >= '0' && ch <= '9') {
      number = number * 10 + (ch - '0');
      have_digits = true;
    } else if ((ch == 'h' || ch == 'm' || ch == 's') && have_digits) {
      total += number * (ch == 'h' ? 3600 : ch == 'm' ? 60 : 1);
      number = 0;
      have_digits = false;
    } else {
      return -1;
    }
  }
  return total + number;  // trailing digits are seconds
}

namespace {

std::string format_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::string range_text(const Field& f) {
  bool integer = f.type_name() == "int";
  std::string kind = integer ? "an integer" : "a number";
  bool has_max = std::isfinite(f.max) && f.max < 1e8;
  if (has_max && std::isfinite(f.min))
    return kind + " in [" + format_number(f.min) + ", " + format_number(f.max) + "]";
  if (std::isfinite(f.min)) return kind + " >= " + format_number(f.min);
  return kind;
}

}  // namespace

std::vector<std::string> config_problems(const Config& c) {
  std::vector<std::string> problems;
  for (const auto& f : config_fields()) {
    nlohmann::json v = f.get(c);
    if (v.is_number()) {
      double x = v.get<double>();
      if (!(x >= f.min && x <= f.max))
        problems.push_back(f.name + " '" + v.dump() + "' (expected " + range_text(f) + ")");
    } else if (v.is_string() && !f.choices.empty()) {
      std::string s = v.get<std::string>();
      if (std::find(f.choices.begin(), f.choices.end(), s) == f.choices.end())
        problems.push_back(f.name + " '" + s + "' (expected one of: " + join(f.choices, ", ") + ")" +
                           did_you_mean(s, f.choices));
    }
  }
  static const std::regex device_re("auto|cpu|cuda|cuda:[0-9]+");
  if (!std::regex_match(c.device, device_re))
    problems.push_back("device '" + c.device + "' (expected auto, cpu, cuda or cuda:N)");
  auto shape = parse_shape(c.input_shape);
  if (shape.size() != 3)
    problems.push_back("input_shape '" + c.input_shape + "' (expected CxHxW, e.g. 3x32x32)");
  else if (shape[0] * shape[1] * shape[2] > (int64_t{1} << 26))
    problems.push_back("input_shape '" + c.input_shape + "' (more than 2^26 values per sample)");
  if (c.lr >= 0 && c.min_lr > c.lr)
    problems.push_back("min_lr '" + format_number(c.min_lr) + "' (expected <= lr " +
                       format_number(c.lr) + ")");
  if (!c.time_limit.empty() && parse_duration(c.time_limit) <= 0)
    problems.push_back("time_limit '" + c.time_limit + "' (expected a duration like 8h45m, 90m or 3600)");
  if (c.resume == "auto" && c.output_dir.empty())
    problems.push_back("resume 'auto' needs --output_dir (the run folder to continue)");
  if (c.nesterov && c.optimizer == "sgd" && c.momentum == 0)
    problems.push_back("nesterov needs a momentum > 0 (got --momentum 0)");
  return problems;
}


nlohmann::json to_json(const Config& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : config_fields()) j[f.name] = f.get(c);
  return j;
}

}  // namespace gputrain
