// Reading CSV files (RFC 4180 quoting, CRLF or LF, optional BOM) into a flat table of strings.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gputrain {

struct CsvTable {
  std::string path;                  // for messages
  char separator = ',';              // ',' or, when the header has no comma, ';' or tab
  std::vector<std::string> columns;  // header names, unique and non-empty
  // Row-major cells, rows() * cols() of them, unquoted and packed end to end in one buffer;
  // cell i is text[ends[i-1], ends[i]). About 8 bytes per cell on top of the text, where a
  // std::string per cell would cost 32 and an allocation.
  std::string text;
  std::vector<uint64_t> ends;
  // The 1-based file line each data row starts on, so later errors can point at it.
  std::vector<int64_t> lines;

  int64_t rows() const { return static_cast<int64_t>(lines.size()); }
  int64_t cols() const { return static_cast<int64_t>(columns.size()); }
  std::string_view cell(int64_t row, int64_t col) const {
    size_t i = static_cast<size_t>(row * cols() + col);
    size_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(text).substr(begin, ends[i] - begin);
  }
  int64_t line(int64_t row) const { return lines[static_cast<size_t>(row)]; }
  // Index of the column called `name`, or -1.
  int64_t column_index(std::string_view name) const;
};

// Reads and checks a whole CSV file: a header row and at least one data row, every row with as
// many fields as the header. Blank lines are skipped; spaces around unquoted fields are trimmed.
// Throws a usage error (exit 2) naming the file, the line and the reason.
CsvTable read_csv(const std::string& path);

// `text` as one CSV field: quoted (quotes doubled) when it holds a comma, a quote, a newline or
// spaces at an end, as it is when it is written.
std::string csv_field(std::string_view text);

// The same on text already in memory; `path` only names it in messages.
CsvTable parse_csv(std::string_view text, const std::string& path);

}  // namespace gputrain
