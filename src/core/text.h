// Small text helpers: "did you mean" suggestions, joining, trimming.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gputrain {

// Levenshtein distance, for suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

// The closest candidate to `word`, or "" when none is close enough to be a likely typo.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" when there is no close match.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// Splits a comma-separated list. kExact keeps every item as typed, empty ones too (CSV column
// names: an empty name is an error the caller reports); kTrimmed trims spaces and drops empty
// items (a list of names typed by hand, "a, b,").
enum class ListItems { kExact, kTrimmed };
std::vector<std::string> split_list(std::string_view text, ListItems items);

std::string join(const std::vector<std::string>& items, std::string_view sep);
// "a, b and c" (with `last` = " and "; " or " reads "a, b or c").
std::string join_words(const std::vector<std::string>& items, std::string_view last);

// The whole text as a decimal integer ("12", "-3"), or nothing: no spaces, no "+", no trailing
// characters, nothing out of range. Callers say in their own words what was wrong.
std::optional<int64_t> parse_integer(std::string_view text);

// A shape as "3x32x32" ("()" when empty).
std::string shape_text(const std::vector<int64_t>& shape);

// 11689512 -> "11,689,512": counts read by people.
std::string with_commas(int64_t n);

// Human-readable byte count: "1.5 GiB".
std::string format_bytes(double bytes);

// "1m 23s", "2h 05m", "4.2s".
std::string format_duration(double seconds);

// The time now in UTC, ISO 8601: "2026-11-26T10:42:07Z".
std::string utc_now();

}  // namespace gputrain
