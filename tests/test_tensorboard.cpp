// TensorBoard event files: TFRecord framing and CRCs, the Event protos read back, and a real run.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "monitor/tensorboard.h"
#include "test_util.h"

using namespace gputrain;
namespace fs = std::filesystem;

namespace {

// Bit-at-a-time CRC32C, independent of the table-driven one under test.
uint32_t slow_crc32c(const std::string& s) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
  }
  return ~c;
}
uint32_t slow_masked(const std::string& s) {
  uint32_t crc = slow_crc32c(s);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

uint64_t get_le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s.at(at + i))) << (8 * i);
  return v;
}

// A minimal protobuf reader: fields as (number, wire type, varint/fixed value or bytes).
struct Field {
  int number;
  int wire;
  uint64_t num = 0;
  std::string bytes;
};
uint64_t get_varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    auto b = static_cast<unsigned char>(s.at(at++));
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
}
std::vector<Field> parse_message(const std::string& s) {
  std::vector<Field> out;
  size_t at = 0;
  while (at < s.size()) {
    uint64_t key = get_varint(s, at);
    Field f{static_cast<int>(key >> 3), static_cast<int>(key & 7), 0, {}};
    if (f.wire == 0) {
      f.num = get_varint(s, at);
    } else if (f.wire == 1) {
      f.num = get_le(s, at, 8);
      at += 8;
    } else if (f.wire == 5) {
      f.num = get_le(s, at, 4);
      at += 4;
    } else if (f.wire == 2) {
      uint64_t n = get_varint(s, at);
      f.bytes = s.substr(at, n);
      REQUIRE(f.bytes.size() == n);
      at += n;
    } else
      FAIL("unexpected wire type " << f.wire);
    out.push_back(f);
  }
  return out;
}

struct Event {
  double wall_time = 0;
  int64_t step = -1;
  std::string file_version;
  std::vector<std::pair<std::string, float>> scalars;
};

Event decode_event(const std::string& data) {
  Event e;
  for (const auto& f : parse_message(data)) {
    if (f.number == 1 && f.wire == 1)
      std::memcpy(&e.wall_time, &f.num, 8);
    else if (f.number == 2 && f.wire == 0)
      e.step = static_cast<int64_t>(f.num);
    else if (f.number == 3 && f.wire == 2)
      e.file_version = f.bytes;
    else if (f.number == 5 && f.wire == 2) {
      for (const auto& v : parse_message(f.bytes)) {
        REQUIRE(v.number == 1);
        std::string tag;
        float value = NAN;
        for (const auto& x : parse_message(v.bytes)) {
          if (x.number == 1 && x.wire == 2) tag = x.bytes;
          if (x.number == 2 && x.wire == 5) {
            auto bits = static_cast<uint32_t>(x.num);
            std::memcpy(&value, &bits, 4);
          }
        }
        e.scalars.emplace_back(tag, value);
      }
    } else
      FAIL("unexpected Event field " << f.number);
  }
  return e;
}

// Walks the TFRecord framing, checking both CRCs of every record; throws on a bad one.
std::vector<Event> read_events(const std::string& path) {
  std::string s = test::read_file(path);
  std::vector<Event> out;
  size_t at = 0;
  while (at < s.size()) {
    if (s.size() - at < 12) throw std::runtime_error("truncated header");
    std::string len_bytes = s.substr(at, 8);
    uint64_t len = get_le(s, at, 8);
    if (get_le(s, at + 8, 4) != slow_masked(len_bytes)) throw std::runtime_error("length CRC");
    if (s.size() - at - 12 < len + 4) throw std::runtime_error("truncated record");
    std::string data = s.substr(at + 12, len);
    if (get_le(s, at + 12 + len, 4) != slow_masked(data)) throw std::runtime_error("data CRC");
    out.push_back(decode_event(data));
    at += 12 + len + 4;
  }
  return out;
}

std::string only_event_file(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
  REQUIRE(files.size() == 1);
  return files[0];
}

}  // namespace

TEST_CASE("tensorboard: CRC32C matches the Castagnoli test vectors", "[tensorboard]") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
  std::string zeros(32, '\0');
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);  // RFC 3720 B.4
  std::string text = "The quick brown fox jumps over the lazy dog";
  CHECK(crc32c(text.data(), text.size()) == slow_crc32c(text));
  CHECK(masked_crc32c(text.data(), text.size()) == slow_masked(text));
}

TEST_CASE("tensorboard: scalars read back exactly from the event file", "[tensorboard]") {
  test::TempDir dir;
  std::string path;
  {
    TensorBoardWriter w(dir / "tb");
    path = w.path();
    w.add_scalars(7, {{"train/loss", 1.25f}, {"train/lr", 3e-4f}});
    w.add_scalars(123456789012LL, {{"test/accuracy", 0.875f}});
  }
  CHECK(fs::path(path).parent_path() == dir.path / "tb");
  CHECK(fs::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  CHECK_THAT(path, Catch::EndsWith(".gputrain"));
  auto events = read_events(path);
  REQUIRE(events.size() == 3);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[0].wall_time > 1.6e9);
  CHECK(events[1].step == 7);
  REQUIRE(events[1].scalars.size() == 2);
  CHECK(events[1].scalars[0] == std::pair<std::string, float>{"train/loss", 1.25f});
  CHECK(events[1].scalars[1] == std::pair<std::string, float>{"train/lr", 3e-4f});
  CHECK(events[2].step == 123456789012LL);
  REQUIRE(events[2].scalars.size() == 1);
  CHECK(events[2].scalars[0] == std::pair<std::string, float>{"test/accuracy", 0.875f});
  CHECK(events[2].wall_time >= events[0].wall_time);

  SECTION("a corrupt byte fails a CRC check") {
    std::string bytes = test::read_file(path);
    for (size_t at : {size_t{3}, bytes.size() - 10}) {  // in a length, in the last record's data
      std::string bad = bytes;
      bad[at] = static_cast<char>(bad[at] ^ 0x40);
      test::write_file(path, bad);
      CHECK_THROWS(read_events(path));
    }
  }
}

TEST_CASE("tensorboard: metrics records map to train/ and test/ tags", "[tensorboard]") {
  test::TempDir dir;
  std::string path;
  {
    TensorBoardWriter w(dir / "tb");
    path = w.path();
    w.write({{"event", "step"}, {"step", 4}, {"epoch", 0}, {"loss", 1.5}, {"lr", 0.01}, {"skipped_steps", 1}});
    w.write({{"event", "eval"},
             {"step", 16},
             {"epoch", 0},
             {"samples", 128},
             {"test_loss", 0.5},
             {"test_accuracy", 0.75},
             {"test_ema_accuracy", 0.5}});
    w.write({{"event", "summary"}, {"step", 16}, {"wall_seconds", 3.0}});  // not a scalar source
  }
  auto events = read_events(path);
  REQUIRE(events.size() == 3);
  CHECK(events[1].step == 4);
  CHECK(events[1].scalars == std::vector<std::pair<std::string, float>>{{"train/loss", 1.5f}, {"train/lr", 0.01f}});
  CHECK(events[2].step == 16);
  CHECK(events[2].scalars == std::vector<std::pair<std::string, float>>{
                                 {"test/accuracy", 0.75f}, {"test/ema_accuracy", 0.5f}, {"test/loss", 0.5f}});
}

TEST_CASE("tensorboard: a folder that cannot be created is a usage error", "[tensorboard]") {
  test::TempDir dir;
  test::write_file(dir / "file", "x");
  try {
    TensorBoardWriter w(dir / "file");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.exit_code == kExitUsage);
  }
}

TEST_CASE("tensorboard: train --tensorboard writes train/loss at the logged steps", "[tensorboard][cli]") {
  test::TempDir dir;
  auto run = dir.path / "run";
  auto r = test::run_gputrain("train --preset smoke --tensorboard --output_dir " + run.string());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("tensorboard/"));

  std::vector<std::pair<int64_t, float>> logged, eval_acc;
  for (const auto& rec : test::read_jsonl((run / "metrics.jsonl").string())) {
    if (rec["event"] == "step") logged.emplace_back(rec["step"].get<int64_t>(), rec["loss"].get<float>());
    if (rec["event"] == "eval") eval_acc.emplace_back(rec["step"].get<int64_t>(), rec["test_accuracy"].get<float>());
  }
  REQUIRE(!logged.empty());
  REQUIRE(eval_acc.size() == 2);

  std::vector<std::pair<int64_t, float>> tb_loss, tb_acc;
  for (const auto& e : read_events(only_event_file(run / "tensorboard")))
    for (const auto& [tag, v] : e.scalars) {
      if (tag == "train/loss") tb_loss.emplace_back(e.step, v);
      if (tag == "test/accuracy") tb_acc.emplace_back(e.step, v);
    }
  CHECK(tb_loss == logged);
  CHECK(tb_acc == eval_acc);
}

TEST_CASE("tensorboard: train with a tensorboard folder that cannot be created: exit 2, no run left",
          "[tensorboard][cli]") {
  test::TempDir dir;
  auto run = dir.path / "run";
  fs::create_directories(run);
  test::write_file((run / "tensorboard").string(), "in the way");
  auto r = test::run_gputrain("train --preset smoke --tensorboard --output_dir " + run.string());
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("tensorboard"));
  CHECK(!fs::exists(run / "metrics.jsonl"));
}
