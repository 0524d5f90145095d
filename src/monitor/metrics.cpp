// metrics.jsonl: one JSON object per line, flushed as written so a crash loses nothing.
#include "monitor/metrics.h"

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace gputrain {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "a+")) {
  if (!f_)
    throw runtime_error("writing " + path + ": " + std::strerror(errno), "check that the output folder is writable");
  // A record torn by a crash ends without a newline: end it, so that it stays one line that readers
  // skip and the records appended now stay whole.
  if (std::fseek(f_, -1, SEEK_END) == 0 && std::fgetc(f_) != '\n') write_text("\n");
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

void MetricsWriter::write(const nlohmann::json& record) { write_text(record.dump() + "\n"); }

void MetricsWriter::write_text(const std::string& text) {
  // In append mode every write goes to the end, wherever the read above left the position.
  if (std::fwrite(text.data(), 1, text.size(), f_) != text.size() || std::fflush(f_) != 0)
    throw runtime_error("writing " + path_ + ": " + std::strerror(errno));
}

}  // namespace gputrain
