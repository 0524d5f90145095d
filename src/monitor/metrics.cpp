// metrics.jsonl: one JSON object per line, flushed as written so a crash loses nothing.
#include "monitor/metrics.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace gputrain {

MetricsWriter::MetricsWriter(const std::string& path) : f_(std::fopen(path.c_str(), "a")) {
  if (!f_) throw runtime_error("cannot write '" + path + "'", "check that the output folder is writable");
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), f_);
  std::fflush(f_);
}

}  // namespace gputrain
