// Language models: token shards as windows (--dataset tokens), their bad inputs, and gpt against
// Hugging Face's GPT-2 (tests/python/gpt_check.py).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/token_dataset.h"
#include "test_errors.h"
#include "test_python.h"
#include "test_tokens.h"
#include "test_util.h"

using namespace gputrain;
using test::write_llmc;

namespace {

std::vector<int64_t> range(int64_t first, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

struct Fields : FieldWriter {
  std::vector<int64_t> ids, labels;
  void* field(size_t f, int64_t) override { return f == 0 ? ids.data() : labels.data(); }
};

std::pair<std::vector<int64_t>, std::vector<int64_t>> window(const TokenDataset& d, int64_t i) {
  Fields w;
  w.ids.resize(static_cast<size_t>(d.seq_len()));
  w.labels.resize(static_cast<size_t>(d.seq_len()));
  d.get_fields(i, w, 0);
  return {w.ids, w.labels};
}

// A tests/python check that runs the built gputrain in a folder of its own: its exit code, its
// output in `log`.
int gputrain_check(const std::string& script, std::string& log) {
  test::TempDir dir;
  return test::python(script + " " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
}

}  // namespace

TEST_CASE("tokens: windows of seq_len + 1 in each shard, labels one token on, in every file format", "[data]") {
  test::TempDir dir;
  write_llmc(dir / "a.bin", range(0, 41));     // 5 windows of 8 (+1)
  write_llmc(dir / "b.bin", range(100, 21), 20240801, 7);  // uint32: 2 windows
  TokenDataset d({dir / "a.bin", dir / "b.bin"}, 8, 200);
  REQUIRE(d.size() == 7);
  CHECK(d.tokens() == 62);
  CHECK(d.num_classes() == 200);
  CHECK(d.shards()[1].format == "llm.c uint32");
  CHECK(window(d, 0) == std::pair{range(0, 8), range(1, 8)});
  CHECK(window(d, 4) == std::pair{range(32, 8), range(33, 8)});  // its last label is the shard's last token
  CHECK(window(d, 5) == std::pair{range(100, 8), range(101, 8)});  // no window crosses a file's end
  CHECK(window(d, 6) == std::pair{range(108, 8), range(109, 8)});
  CHECK(TokenDataset({dir / "a.bin"}, 8, 200, 2).size() == 2);  // --eval_tokens: the first windows

  // nanoGPT's headerless uint16 and an int32 .npy read the same tokens.
  {
    std::ofstream raw(dir / "nano.bin", std::ios::binary);
    for (int64_t t : range(0, 41)) {
      const auto v = static_cast<uint16_t>(t);
      raw.write(reinterpret_cast<const char*>(&v), 2);
    }
  }
  TokenDataset nano({dir / "nano.bin"}, 8, 200);
  CHECK(nano.shards()[0].format == "uint16 (no header)");
  CHECK(window(nano, 3) == window(d, 3));
  // An .npy of int32, as np.save writes it: magic, version 1.0, a header padded to 64 bytes.
  {
    std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (41,), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::ofstream npy(dir / "t.npy", std::ios::binary);
    npy.write("\x93NUMPY\x01\x00", 8);
    const auto length = static_cast<uint16_t>(header.size());
    npy.write(reinterpret_cast<const char*>(&length), 2);
    npy << header;
    for (int64_t t : range(0, 41)) {
      const auto v = static_cast<int32_t>(t);
      npy.write(reinterpret_cast<const char*>(&v), 4);
    }
  }
  TokenDataset npy({dir / "t.npy"}, 8, 200);
  CHECK(npy.shards()[0].format == "npy int32");
  CHECK(window(npy, 3) == window(d, 3));
}

TEST_CASE("tokens: a bad shard, an id outside the vocabulary or too few tokens exit 2 naming the file", "[data][cli]") {
  test::TempDir dir;
  const std::string base = "train --dataset tokens --model gpt --width 16 --heads 2 --depth 1 --seq_len 8 --max_steps 1 ";
  auto refused = [&](const std::string& flags, const std::string& expected) {
    const std::string out = dir / "run";
    auto r = test::run_gputrain(base + flags + " --output_dir " + out);
    INFO(flags << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(expected));
    CHECK(!std::filesystem::exists(out));
  };
  write_llmc(dir / "magic.bin", range(0, 41), 12345);
  refused("--vocab_size 100 --train_file " + (dir / "magic.bin"),
          "magic.bin: a token shard header with magic 12345 (expected 20240520 or 20240801)");
  write_llmc(dir / "cut.bin", range(0, 41), 20240520, 1, 100);
  refused("--vocab_size 100 --train_file " + (dir / "cut.bin"),
          "cut.bin: its header says 100 tokens (1224 bytes with the header), the file has 1106 bytes");
  write_llmc(dir / "version.bin", range(0, 41), 20240520, 7);
  refused("--vocab_size 100 --train_file " + (dir / "version.bin"), "version.bin: llm.c magic 20240520 with version 7 (expected 1)");
  { std::ofstream(dir / "odd.bin") << "abc"; }
  refused("--vocab_size 100 --train_file " + (dir / "odd.bin"), "odd.bin: 3 bytes: neither an llm.c shard nor uint16 tokens");
  { std::ofstream(dir / "empty.bin"); }
  refused("--vocab_size 100 --train_file " + (dir / "empty.bin"), "empty.bin: holds no tokens");
  write_llmc(dir / "ok.bin", range(0, 41));
  refused("--vocab_size 40 --train_file " + (dir / "ok.bin"), "ok.bin: token 40 at position 40 is outside the vocabulary of 40");
  refused("--vocab_size 100 --seq_len 64 --train_file " + (dir / "ok.bin"),
          "ok.bin: 41 tokens in all, fewer than one window of --seq_len 64 + 1");
  refused("--train_file " + (dir / "ok.bin"), "no vocabulary size (no tokenizer.json beside");
  refused("--vocab_size 100 --eval_tokens 64 --train_file " + (dir / "ok.bin"), "--eval_tokens caps the val shards");
  refused("--vocab_size 100 --positions 4 --train_file " + (dir / "ok.bin"), "--seq_len 8 is above the model's 4 positions");
  refused("--vocab_size 100 --train_file '" + (dir / "none-*.bin") + "'", "none-*.bin");
  // A tokenizer.json beside the shards gives the vocabulary: its largest id + 1.
  std::filesystem::create_directories(dir / "tok");
  write_llmc(dir / "tok/train.bin", range(0, 41));
  { std::ofstream(dir / "tok/tokenizer.json") << R"({"model": {"vocab": {"a": 0, "b": 1}}, "added_tokens": [{"id": 63, "content": "<|endoftext|>"}]})"; }
  auto r = test::run_gputrain(base + "--batch_size 2 --train_file " + (dir / "tok/train.bin") + " --output_dir " + (dir / "tokrun"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("vocabulary 64 (" + (dir / "tok/tokenizer.json") + ")"));
}

TEST_CASE("gpt: logits, 3 AdamW steps on 1 and 2 ranks, and the exported folder equal Hugging Face's GPT-2",
          "[models][python][cli]") {
  if (!test::have_python()) return;
  std::string log;
  const int code = gputrain_check("gpt_check.py", log);
  INFO(log);
  if (code == 77) {
    WARN("transformers is not installed (.pydeps-text): gpt not compared with Hugging Face's GPT-2");
    return;
  }
  CHECK(code == 0);
}

TEST_CASE("prepare_text: the standard library's json package as shards trains the CPU GPT and exports its tokenizer",
          "[data][python][cli]") {
  if (!test::have_python()) return;
  std::string log;
  const int code = gputrain_check("prepare_text_check.py", log);
  INFO(log);
  CHECK(code == 0);
}

TEST_CASE("gpt: the CPU preset against the nanoGPT-style PyTorch loop from the same weights, and its samples",
          "[models][python][cli]") {
  if (!test::have_python()) return;
  std::string log;
  const int code = gputrain_check("gpt_quality_check.py", log);
  INFO(log);
  CHECK(code == 0);
}

TEST_CASE("gpt: --tokens_per_step decides the accumulation, and the head fused with the loss changes no number",
          "[models][cli]") {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "tok");
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 2000; ++i) ids.push_back((i * 7 + i / 13) % 60);
  write_llmc(dir / "tok/train.bin", ids);
  { std::ofstream(dir / "tok/tokenizer.json") << R"({"model": {"vocab": {"a": 0, "b": 1}}, "added_tokens": [{"id": 63, "content": "<|endoftext|>"}]})"; }
  const std::string base = "train --dataset tokens --model gpt --width 16 --heads 2 --depth 1 --seq_len 8 --batch_size 4 "
                           "--no-use_amp --log_every 1 --train_file " + (dir / "tok/train.bin") + " ";

  // 4 x 8 tokens a micro-step: 96 tokens a step are 3 of them.
  auto r = test::run_gputrain(base + "--max_steps 2 --tokens_per_step 96 --output_dir " + (dir / "acc"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto config = nlohmann::json::parse(test::read_file(dir / "acc/config.json"));
  CHECK(config["resolved"]["accumulation_steps"] == 3);
  CHECK_THAT(r.out, Catch::Contains("--tokens_per_step 96 / (4 sample(s) x 8 tokens a micro-step, all ranks)"));

  auto refused = [&](const std::string& flags, const std::string& expected) {
    const std::string out = dir / "refused";
    auto bad = test::run_gputrain(base + flags + " --output_dir " + out);
    INFO(flags << "\n" << bad.out << bad.err);
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains(expected));
    CHECK(!std::filesystem::exists(out));
  };
  // A searched batch size (here the largest under a simulated memory limit of 20 samples, less
  // a margin: 16) is rounded down to one that divides the step's tokens: 12 x 8 = 96.
  auto searched = test::run_gputrain(base + "--max_steps 1 --auto_batch_size --tokens_per_step 96 --output_dir " +
                                         (dir / "searched"),
                                     "GPUTRAIN_FAULT_OOM_ABOVE=20");
  INFO(searched.out << searched.err);
  REQUIRE(searched.exit_code == 0);
  const auto found = nlohmann::json::parse(test::read_file(dir / "searched/config.json"))["resolved"];
  CHECK(found["batch_size"] == 12);
  CHECK(found["accumulation_steps"] == 1);
  CHECK_THAT(searched.out, Catch::Contains("rounded down to divide --tokens_per_step 96"));
  CHECK_THAT(searched.out, Catch::Contains("1 micro-batches (effective batch 12; --tokens_per_step 96)"));

  refused("--tokens_per_step 100", "--tokens_per_step 100 is not a multiple of the tokens of one micro-step: 32");
  refused("--tokens_per_step 96 --accumulation_steps 2", "--tokens_per_step decides --accumulation_steps: give one of them");
  refused("--sample_every 1 --vocab_size 64", "--sample_every writes text, and this run has no tokenizer");
  refused("--sample_every 1 --model mlp", "--sample_every is for gpt");
  refused("--pipeline_stages 2", "model 'gpt' cannot be split into stages: its head is its token embedding (tied)");

  // The same 3 steps with the head in the model's forward and fused with the loss.
  std::vector<double> losses[2];
  for (int fused = 0; fused < 2; ++fused) {
    const std::string out = dir / ("fused" + std::to_string(fused));
    auto run = test::run_gputrain(base + "--max_steps 3 --label_smoothing 0.1 " + (fused ? "" : "--no-fused_head_loss ") +
                                  "--output_dir " + out);
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Catch::Contains(fused ? "fused head loss       on" : "fused head loss       off"));
    std::ifstream in(out + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);)
      if (auto j = nlohmann::json::parse(line); j["event"] == "step") losses[fused].push_back(j["loss"]);
  }
  REQUIRE(losses[0].size() == 3);
  REQUIRE(losses[1].size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(losses[1][i] == Approx(losses[0][i]).epsilon(1e-5));
}

TEST_CASE("gpt: benchmark reports tokens/s and the fused head's variant, and races to a val_loss", "[bench][cli]") {
  test::TempDir dir;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 3000; ++i) ids.push_back(i % 5 == 0 ? 1 : i % 17);
  write_llmc(dir / "train.bin", ids);
  write_llmc(dir / "val.bin", std::vector<int64_t>(ids.begin(), ids.begin() + 400));
  const std::string base = "benchmark --dataset tokens --model gpt --width 16 --heads 2 --depth 1 --seq_len 8 "
                           "--batch_size 4 --vocab_size 20 --train_file " + (dir / "train.bin") + " --test_file " +
                           (dir / "val.bin") + " ";
  auto r = test::run_gputrain(base + "--variants fused_head_loss --steps 3 --warmup_steps 1 --json " + (dir / "b.json"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("| tokens/s |"));
  const auto bench = nlohmann::json::parse(test::read_file(dir / "b.json"));
  bool saw = false;
  for (const auto& v : bench["variants"]) {
    if (v["name"] != "fused_head_loss") continue;
    saw = true;
    CHECK(v["status"] == "ok");
    CHECK(v["tokens_per_sec"].get<double>() == Approx(v["samples_per_sec"].get<double>() * 8));
    CHECK(v["switches"]["fused_head_loss"] == true);
  }
  CHECK(saw);

  auto until = test::run_gputrain(base + "--variants all --until val_loss=100 --eval_every 2 --seeds 1");
  INFO(until.out << until.err);
  CHECK(until.exit_code == 0);
  CHECK_THAT(until.out, Catch::Contains("test_loss=100"));
}
