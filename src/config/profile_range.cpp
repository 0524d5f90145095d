// --profile START:STOP parsed (profile_range.h).
#include "config/profile_range.h"

#include <fmt/format.h>

#include "core/text.h"

namespace gputrain {

std::optional<ProfileRange> ProfileRange::parse(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto a = parse_integer(text.substr(0, colon)), b = parse_integer(text.substr(colon + 1));
  if (!a || !b || *a < 0 || *b <= *a) return std::nullopt;
  return ProfileRange{*a, *b};
}

std::string ProfileRange::text() const { return fmt::format("{}:{}", start, stop); }

}  // namespace gputrain
