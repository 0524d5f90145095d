// metrics.jsonl: one JSON object per line, flushed as written so a crash loses nothing.
#pragma once
#include <cstdio>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace gputrain {

class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::FILE* f_ = nullptr;
};

}  // namespace gputrain
