// libFuzzer target: preset/config JSON on arbitrary bytes, through the same code as --config
// (apply the keys, then every range and choice check).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/fields.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  gputrain::Config c;
  std::vector<std::string> problems;
  gputrain::apply_json(c, j, "fuzz.json", problems, {"description"});
  gputrain::config_problems(c);
  gputrain::to_json(c);
  return 0;
}
