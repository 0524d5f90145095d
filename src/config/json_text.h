// Reading JSON settings safely: the limits are checked while parsing, before anything recurses
// over the value (a value nested 100,000 deep overflowed the stack when printed in a message).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace gputrain {

// Settings files are flat objects; 32 levels leaves room for any real one.
constexpr int kMaxJsonDepth = 32;

// Parses `text`; `where` names it in messages. Syntax errors, nesting deeper than
// kMaxJsonDepth, a key given twice in one object and numbers that do not fit (1e400) are usage
// errors naming `where`.
nlohmann::json parse_json_text(const std::string& text, const std::string& where);

}  // namespace gputrain
