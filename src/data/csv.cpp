// The CSV reader: a small RFC 4180 state machine that keeps line numbers for its messages.
#include "data/csv.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {
namespace {

constexpr const char* kQuoteHint =
    "quote a field that holds the separator, a quote or a newline, and write a quote inside it "
    "as two quotes: \"say \"\"hi\"\", then go\"";

Error csv_error(const std::string& path, const std::string& why, std::string hint = "") {
  return usage_error("CSV file '" + path + "': " + why, std::move(hint));
}

std::string describe(char c) {
  if (c == '\t') return "a tab";
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
    return fmt::format("byte 0x{:02x}", static_cast<unsigned char>(c));
  }
  return std::string("'") + c + "'";
}

// The header decides the separator: a comma if it has one outside quotes, else ';', else tab.
// A one-column file has none of them and reads the same with any.
char detect_separator(std::string_view text) {
  bool quoted = false, semicolon = false, tab = false;
  for (char c : text) {
    if (c == '"') {
      quoted = !quoted;  // a doubled quote toggles twice, which is what we want
    } else if (!quoted) {
      if (c == '\n' || c == '\r') break;
      if (c == ',') return ',';
      if (c == ';') semicolon = true;
      if (c == '\t') tab = true;
    }
  }
  return semicolon ? ';' : tab ? '\t' : ',';
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& path, char sep) : t_(text), path_(path), sep_(sep) {}

  // Appends the fields of the next non-blank record to `text` (each one's end offset to
  // `ends`) and returns how many there were, or -1 at the end of the input. `start_line` is the
  // line the record starts on.
  int64_t next(std::string& text, std::vector<uint64_t>& ends, int64_t& start_line) {
    skip_blank_lines();
    if (i_ >= t_.size()) return -1;
    start_line = line_;
    int64_t count = 0;
    for (;;) {
      field(text);
      ends.push_back(text.size());
      ++count;
      if (i_ >= t_.size()) return count;
      char c = t_[i_];
      if (c == sep_) {
        ++i_;
        continue;
      }
      end_line();  // field() stops only at the separator, a newline or the end
      return count;
    }
  }

 private:
  bool is_space(char c) const { return c == ' ' || (c == '\t' && sep_ != '\t'); }
  bool at_newline() const { return i_ < t_.size() && (t_[i_] == '\n' || t_[i_] == '\r'); }

  void end_line() {
    if (t_[i_] == '\r' && i_ + 1 < t_.size() && t_[i_ + 1] == '\n') ++i_;
    ++i_;
    ++line_;
  }

  // Empty lines and lines of only spaces are no records (a stray blank line at the end of a
  // file is common; counting it as a one-field row would be a confusing error).
  void skip_blank_lines() {
    for (;;) {
      size_t j = i_;
      while (j < t_.size() && is_space(t_[j])) ++j;
      if (j >= t_.size()) {
        i_ = j;
        return;
      }
      if (t_[j] != '\n' && t_[j] != '\r') return;
      i_ = j;
      end_line();
    }
  }

  void field(std::string& out) {
    while (i_ < t_.size() && is_space(t_[i_])) ++i_;
    if (i_ < t_.size() && t_[i_] == '"') return quoted_field(out);
    size_t start = i_;
    while (i_ < t_.size() && t_[i_] != sep_ && t_[i_] != '\n' && t_[i_] != '\r') ++i_;
    size_t end = i_;
    while (end > start && is_space(t_[end - 1])) --end;
    out.append(t_.substr(start, end - start));
  }

  void quoted_field(std::string& s) {
    int64_t open_line = line_;
    ++i_;  // the opening quote
    for (;;) {
      if (i_ >= t_.size())
        throw csv_error(path_, fmt::format("line {}: a quoted field is never closed (unterminated quote)", open_line),
                        kQuoteHint);
      // Copy the run up to the next quote in one go: quoted text can be long.
      size_t q = t_.find('"', i_);
      size_t stop = q == std::string_view::npos ? t_.size() : q;
      for (size_t k = i_; k < stop; ++k)
        if (t_[k] == '\n') ++line_;
      s.append(t_.substr(i_, stop - i_));
      i_ = stop;
      if (q == std::string_view::npos) continue;  // reports the unterminated quote above
      if (i_ + 1 < t_.size() && t_[i_ + 1] == '"') {
        s += '"';
        i_ += 2;
        continue;
      }
      ++i_;  // the closing quote
      break;
    }
    while (i_ < t_.size() && is_space(t_[i_])) ++i_;
    if (i_ < t_.size() && t_[i_] != sep_ && !at_newline())
      throw csv_error(path_, fmt::format("line {}: unexpected {} after a closing quote", line_, describe(t_[i_])),
                      kQuoteHint);
  }

  std::string_view t_;
  const std::string& path_;
  char sep_;
  size_t i_ = 0;
  int64_t line_ = 1;
};

std::string separator_name(char sep) { return sep == '\t' ? "tab" : std::string("'") + sep + "'"; }

}  // namespace

int64_t CsvTable::column_index(std::string_view name) const {
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return static_cast<int64_t>(i);
  return -1;
}

CsvTable parse_csv(std::string_view text, const std::string& path) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte order mark
  CsvTable table;
  table.path = path;
  table.separator = detect_separator(text);
  Parser parser(text, path, table.separator);

  int64_t header_line = 0;
  {
    std::string names;
    std::vector<uint64_t> ends;
    if (parser.next(names, ends, header_line) < 0)
      throw csv_error(path, "is empty (expected a header row naming the columns, then data rows)");
    for (size_t c = 0; c < ends.size(); ++c) {
      size_t begin = c == 0 ? 0 : ends[c - 1];
      table.columns.push_back(names.substr(begin, ends[c] - begin));
    }
  }
  std::unordered_map<std::string_view, size_t> seen;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const std::string& name = table.columns[c];
    if (name.empty())
      throw csv_error(path, fmt::format("line {}: column {} of the header has no name", header_line, c + 1),
                      "name every column; pandas writes an unnamed index column unless given to_csv(index=False)");
    auto [it, fresh] = seen.emplace(name, c);
    if (!fresh)
      throw csv_error(path,
                      fmt::format("line {}: column name '{}' appears twice in the header (columns {} and {})",
                                  header_line, name, it->second + 1, c + 1),
                      "give every column a different name");
  }

  const int64_t m = table.cols();
  int64_t line = 0, k;
  table.text.reserve(text.size());  // cells are never longer than the file
  while ((k = parser.next(table.text, table.ends, line)) >= 0) {
    if (k != m)
      throw csv_error(path,
                      fmt::format("line {} has {} field{}, the header has {} (separator {})", line, k,
                                  k == 1 ? "" : "s", m, separator_name(table.separator)),
                      kQuoteHint);
    table.lines.push_back(line);
  }
  if (table.lines.empty())
    throw csv_error(path, "has a header but no data rows", "a CSV dataset needs at least one row of values");
  return table;
}

CsvTable read_csv(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw csv_error(path, "is a directory, not a file", "point the dataset at a .csv file");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw csv_error(path, "cannot open (no such file, or not readable)", "check the path in the config");
  std::string text;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, got);
  if (std::ferror(f.get())) throw csv_error(path, "read error (is it a regular file?)");
  return parse_csv(text, path);
}

std::string csv_field(std::string_view text) {
  const bool plain = text.find_first_of(",\"\r\n") == std::string_view::npos &&
                     (text.empty() || (text.front() != ' ' && text.back() != ' '));
  if (plain) return std::string(text);
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace gputrain
