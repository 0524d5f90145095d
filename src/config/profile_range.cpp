// --profile START:STOP parsed (profile_range.h).
#include "config/profile_range.h"

#include <vector>

#include <fmt/format.h>

#include "core/text.h"

namespace gputrain {

std::optional<ProfileRange> ProfileRange::parse(const std::string& text) {
  std::vector<std::string> parts{""};
  for (char ch : text) {
    if (ch == ':')
      parts.emplace_back();
    else
      parts.back().push_back(ch);
  }
  if (parts.size() < 2 || parts.size() > 3 || (parts.size() == 3 && parts[2] != "shapes")) return std::nullopt;
  const auto a = parse_integer(parts[0]), b = parse_integer(parts[1]);
  if (!a || !b || *a < 0 || *b <= *a) return std::nullopt;
  return ProfileRange{*a, *b, parts.size() == 3};
}

std::string ProfileRange::text() const { return fmt::format("{}:{}{}", start, stop, shapes ? ":shapes" : ""); }

}  // namespace gputrain
