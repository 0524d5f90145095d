// TensorBoard event files (TFRecord framing of hand-encoded Event protos), so runs show in `tensorboard --logdir`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gputrain {

// CRC32C (Castagnoli), the checksum TFRecord uses; zlib's crc32 is a different polynomial.
uint32_t crc32c(const void* data, size_t size);
// TFRecord stores checksums rotated and offset, so a CRC of data that holds CRCs stays sound.
uint32_t masked_crc32c(const void* data, size_t size);

class TensorBoardWriter {
 public:
  // Creates `dir` and a new events.out.tfevents.<time>.<host>.<pid>.gputrain file in it; a folder
  // that cannot be created is a usage error.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // The numeric fields of a metrics.jsonl record as scalars at its step: a `step` event's loss, lr,
  // ... as train/<name>, an `eval` event's test_<name> as test/<name>; other events are ignored.
  void write(const nlohmann::json& record);
  // One Event holding these scalars; flushed at once so a crash loses nothing.
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);
  std::FILE* f_ = nullptr;
  std::string path_;
};

}  // namespace gputrain
