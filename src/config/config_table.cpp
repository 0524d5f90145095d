// The configuration as the table `train` prints at start.
#include "config/config_table.h"

#include <string>

#include <fmt/format.h>

#include "config/fields.h"

namespace gputrain {
namespace {

std::string text(const nlohmann::json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  return s.empty() ? "-" : s;
}

}  // namespace

void print_config_table(const ResolvedConfig& r) {
  fmt::print("configuration (requested -> resolved):\n");
  const auto& fields = config_fields();
  const auto resolved = r.resolved_json();
  auto cell = [&](size_t k) {
    if (k >= fields.size()) return std::string();
    const std::string asked = text(fields[k].get(r.requested)), used = text(resolved[fields[k].name]);
    return fmt::format("{:<21} {:<18}", fields[k].name, asked == used ? asked : asked + " -> " + used);
  };
  // Two columns keep the table on one screen.
  const size_t half = (fields.size() + 1) / 2;
  for (size_t i = 0; i < half; ++i) fmt::print("  {}  {}\n", cell(i), cell(i + half));
  if (r.reasons.empty()) return;
  fmt::print("resolved:\n");
  for (const auto& [name, why] : r.reasons) {
    const Field* f = find_field(name);
    fmt::print("  {:<21} {} -> {} ({})\n", name, text(f->get(r.requested)), text(resolved[f->name]), why);
  }
}

}  // namespace gputrain
