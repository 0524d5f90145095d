// Data fingerprints: sizes, times and the CRC-32 of each file's two ends.
#include "data/data_fingerprint.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace fs = std::filesystem;

namespace gputrain {
namespace {

// A rewritten header or tail (the usual edit of a data file) changes the CRC; a change inside a
// large file that keeps its size and time does not show, which is why the time is kept too.
constexpr std::streamsize kEnd = 1 << 20;

std::string crc_of_ends(const std::string& path, uintmax_t size) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(kEnd);
  uLong crc = crc32(0L, Z_NULL, 0);
  auto add = [&](uintmax_t at, std::streamsize n) {
    in.seekg(static_cast<std::streamoff>(at));
    in.read(buf.data(), n);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(in.gcount()));
  };
  const auto end = static_cast<uintmax_t>(kEnd);
  add(0, static_cast<std::streamsize>(std::min(size, end)));
  if (size > end) {
    const uintmax_t tail = std::max(end, size - end);  // the last MiB, or what follows the first
    add(tail, static_cast<std::streamsize>(size - tail));
  }
  return fmt::format("{:08x}", crc);
}

nlohmann::json file_record(const fs::path& p) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(p, ec);
  const auto mtime = fs::last_write_time(p, ec);
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::file_clock::to_sys(mtime).time_since_epoch()).count();
  return {{"bytes", size}, {"mtime", seconds}, {"crc32_ends", crc_of_ends(p.string(), size)}};
}

}  // namespace

nlohmann::json data_fingerprint(const Config& c, int64_t train_samples, int64_t test_samples) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto* named : {&c.train_file, &c.test_file, &c.train_targets, &c.test_targets})
    if (!named->empty() && fs::is_regular_file(*named, ec)) files.emplace_back(*named);
  const auto add_folder = [&](const fs::path& dir) {
    std::vector<fs::path> in_dir;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file(ec)) in_dir.push_back(e.path());
    constexpr size_t kMaxFiles = 64;
    if (in_dir.size() <= kMaxFiles) files.insert(files.end(), in_dir.begin(), in_dir.end());
  };
  if (!c.data_dir.empty() && fs::is_directory(c.data_dir, ec)) add_folder(c.data_dir);
  // A table of texts is tokenized at load: its tokenizer is part of the data, and so are the
  // files beside a .model that decide its special tokens.
  if (c.dataset == "text" && !c.tokenizer.empty()) {
    if (fs::is_directory(c.tokenizer, ec)) {
      add_folder(c.tokenizer);
    } else if (fs::is_regular_file(c.tokenizer, ec)) {
      files.emplace_back(c.tokenizer);
      for (const char* beside : {"tokenizer_config.json", "config.json"})
        if (const auto p = fs::path(c.tokenizer).parent_path() / beside; fs::is_regular_file(p, ec)) files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  nlohmann::json out = {{"train_samples", train_samples}, {"test_samples", test_samples}, {"files", nlohmann::json::object()}};
  for (const auto& f : files) out["files"][f.string()] = file_record(f);
  return out;
}

}  // namespace gputrain
