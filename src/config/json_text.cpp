// Reading JSON settings with limits checked while parsing.
#include "config/json_text.h"

#include <set>
#include <vector>

#include "core/error.h"

namespace gputrain {

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
  std::vector<std::set<std::string>> keys;  // the keys seen in each open object
  auto limits = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > kMaxJsonDepth)
      throw usage_error("'" + where + "' nests deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                        "settings are a flat JSON object of keys and values");
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end && !keys.empty()) keys.pop_back();
    if (event == E::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second) {
      std::string key = parsed.get<std::string>();
      if (key.size() > 64) key = key.substr(0, 64) + "...";
      throw usage_error("'" + where + "' gives key '" + key + "' twice", "keep one of them");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, limits);
  } catch (const nlohmann::json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    const std::string what = e.what();
    const auto at = what.find("] ");
    throw usage_error("'" + where + "' is not valid JSON: " + (at == std::string::npos ? what : what.substr(at + 2)));
  }
}

}  // namespace gputrain
