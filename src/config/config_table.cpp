// The resolved configuration as the two-column table `train` prints at start.
#include "config/config_table.h"

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/fields.h"

namespace gputrain {

void print_config(const Config& c) {
  fmt::print("configuration:\n");
  const auto& fields = config_fields();
  // Two columns keep the table on one screen.
  size_t half = (fields.size() + 1) / 2;
  for (size_t i = 0; i < half; ++i) {
    auto cell = [&](size_t k) {
      if (k >= fields.size()) return std::string();
      auto v = fields[k].get(c);
      std::string s = v.is_string() ? v.get<std::string>() : v.dump();
      return fmt::format("{:<21} {:<18}", fields[k].name, s.empty() ? "-" : s);
    };
    fmt::print("  {}  {}\n", cell(i), cell(i + half));
  }
}

}  // namespace gputrain
