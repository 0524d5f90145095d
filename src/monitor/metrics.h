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
  // One record per line; a write failure (a full disk) is a runtime error naming the file.
  void write(const nlohmann::json& record);

 private:
  void write_text(const std::string& text);
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace gputrain
