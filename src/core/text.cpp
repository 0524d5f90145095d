// Small text helpers: "did you mean" suggestions, joining, sizes and durations.
#include "core/text.h"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <numeric>

#include <fmt/format.h>

namespace gputrain {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;  // beyond this: not a typo
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    // A candidate that contains the word ("batch" -> "batch_size") is also a good guess.
    if (d > 0 && word.size() >= 3 && c.find(word) != std::string::npos) d = std::min(d, size_t{2});
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() > 64) return "";  // no name is that long; and a 10 MB key would cost seconds
  std::string m = closest_match(word, candidates);
  return m.empty() ? "" : " (did you mean '" + m + "'?)";
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string join_words(const std::vector<std::string>& items, std::string_view last) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += i + 1 == items.size() ? last : std::string_view(", ");
    out += items[i];
  }
  return out;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", bytes, units[u]) : fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  if (seconds < 3600) {
    int s = static_cast<int>(seconds + 0.5);
    return fmt::format("{}m {:02}s", s / 60, s % 60);
  }
  int m = static_cast<int>(seconds / 60 + 0.5);
  return fmt::format("{}h {:02}m", m / 60, m % 60);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (auto d : shape) {  // appends: gcc 12 warns falsely on "x" + std::string
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s.empty() ? "()" : s;
}

std::vector<std::string> split_list(std::string_view text, ListItems items) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(',', start);
    std::string_view item = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (items == ListItems::kTrimmed) {
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    }
    if (items == ListItems::kExact || !item.empty()) out.emplace_back(item);
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::optional<int64_t> parse_integer(std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace gputrain
