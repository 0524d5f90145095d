// The resolved configuration as the two-column table `train` prints at start.
#include "config/config_table.h"

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "config/fields.h"

namespace gputrain {

void print_config(const Config& c) {
  std::printf("configuration:\n");
  const auto& fields = config_fields();
  // Two columns keep the table on one screen.
  size_t half = (fields.size() + 1) / 2;
  for (size_t i = 0; i < half; ++i) {
    auto cell = [&](size_t k) {
      if (k >= fields.size()) return std::string();
      auto v = fields[k].get(c);
      std::string s = v.is_string() ? v.get<std::string>() : v.dump();
      char buf[96];
      std::snprintf(buf, sizeof buf, "%-21s %-18s", fields[k].name.c_str(), s.empty() ? "-" : s.c_str());
      return std::string(buf);
    };
    std::printf("  %s  %s\n", cell(i).c_str(), cell(i + half).c_str());
  }
}

}  // namespace gputrain
