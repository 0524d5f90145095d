// libFuzzer target: preset/config JSON on arbitrary bytes, through the same code as --config
// (parse with its limits, apply the keys, then every range and choice check).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/fields.h"
#include "config/json_text.h"
#include "config/validate.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j;
  try {
    j = gputrain::parse_json_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const gputrain::Error& e) {
    if (e.exit_code != gputrain::kExitUsage) __builtin_trap();
    return 0;  // refused, as a user is told
  }
  gputrain::Config c;
  std::vector<std::string> problems;
  gputrain::apply_json(c, j, "fuzz.json", problems, {"description"});
  gputrain::config_problems(c);
  gputrain::to_json(c);
  return 0;
}
