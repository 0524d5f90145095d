// TensorBoard event files (TFRecord framing of hand-encoded Event protos), so runs show in `tensorboard --logdir`.
#include "monitor/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace gputrain {
namespace {

// Reflected Castagnoli polynomial.
constexpr uint32_t kCrc32cPoly = 0x82f63b78u;

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrc32cPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = make_crc_table();

// Protobuf wire format, just the pieces Event/Summary/Value need. Bytes are written one by one
// (little-endian by definition), whatever the host's order.
void put_fixed(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
// Field key: number << 3 | wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>((field << 3) | wire_type));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
std::string event_header(double wall_time, int64_t step) {
  std::string e;
  uint64_t bits;
  std::memcpy(&bits, &wall_time, sizeof bits);
  put_key(e, 1, 1);
  put_fixed(e, bits, 8);
  put_key(e, 2, 0);
  put_varint(e, static_cast<uint64_t>(step));
  return e;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < size; ++i) c = kCrcTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw usage_error("cannot create tensorboard folder '" + dir + "' (" + ec.message() + ")");
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::strcpy(host, "localhost");
  // TensorBoard's own naming, so its loader picks the file up (it matches "tfevents").
  path_ = (std::filesystem::path(dir) /
           fmt::format("events.out.tfevents.{}.{}.{}.gputrain", static_cast<long long>(unix_seconds()), host, getpid()))
              .string();
  f_ = std::fopen(path_.c_str(), "ab");  // append: never clobber another writer's file
  if (!f_) throw runtime_error("writing " + path_ + ": " + std::strerror(errno));
  std::string first = event_header(unix_seconds(), 0);
  put_bytes(first, 3, "brain.Event:2");  // readers check this version record first
  write_event(first);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (f_) std::fclose(f_);
}

void TensorBoardWriter::add_scalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars) {
  if (scalars.empty()) return;
  // Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }
  std::string summary;
  for (const auto& [tag, v] : scalars) {
    std::string value;
    put_bytes(value, 1, tag);
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put_key(value, 2, 5);
    put_fixed(value, bits, 4);
    put_bytes(summary, 1, value);
  }
  std::string event = event_header(unix_seconds(), step);
  put_bytes(event, 5, summary);
  write_event(event);
}

void TensorBoardWriter::write(const nlohmann::json& record) {
  const std::string event = record.value("event", "");
  if (!record.contains("step") || !record["step"].is_number_integer()) return;
  std::vector<std::pair<std::string, float>> scalars;
  if (event == "step") {
    for (const char* name :
         {"loss", "lr", "samples_per_sec", "step_ms", "data_wait_fraction", "grad_norm", "loss_scale"})
      if (record.contains(name) && record[name].is_number())
        scalars.emplace_back(std::string("train/") + name, record[name].get<float>());
  } else if (event == "eval") {
    for (const auto& [key, v] : record.items())
      if (key.rfind("test_", 0) == 0 && v.is_number()) scalars.emplace_back("test/" + key.substr(5), v.get<float>());
  }
  add_scalars(record["step"].get<int64_t>(), scalars);
}

void TensorBoardWriter::write_event(const std::string& event) {
  // TFRecord: uint64 length, masked CRC of the length, data, masked CRC of the data (all LE).
  std::string header;
  put_fixed(header, event.size(), 8);
  std::string footer;
  put_fixed(header, masked_crc32c(header.data(), 8), 4);
  put_fixed(footer, masked_crc32c(event.data(), event.size()), 4);
  std::string rec = header + event + footer;
  if (std::fwrite(rec.data(), 1, rec.size(), f_) != rec.size() || std::fflush(f_) != 0)
    throw runtime_error("writing " + path_ + ": " + std::strerror(errno));
}

}  // namespace gputrain
