// The recipe resolver (pure, on made-up machines) and the Session that every command builds:
// what the resolved record says is what runs, and eval, infer and benchmark build the same one.
#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "test_machines.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/resolve_recipe.h"
#include "train/session.h"

using namespace gputrain;

namespace {

std::string report_row(const Recipe& r, const std::string& what) {
  for (const auto& [name, state] : r.report)
    if (name == what) return state;
  return "";
}

// The "session: ..." line a command printed ("session (all): ..." for a benchmark variant).
std::string session_line(const std::string& out, const std::string& label = "session") {
  std::smatch m;
  std::regex re("(^|\\n) *" + std::regex_replace(label, std::regex("[()]"), "\\$&") + ": ([^\\n]*)");
  return std::regex_search(out, m, re) ? m[2].str() : "";
}

Config smoke() {
  Config c;
  c.dataset = "synthetic";
  c.input_shape = "1x16x16";
  c.num_classes = 4;
  c.synthetic_train_size = 64;
  c.synthetic_test_size = 32;
  c.width = 8;
  c.batch_size = 16;
  c.num_workers = 0;
  return c;
}

// The test loss of a run's last evaluation.
nlohmann::json last_test_loss(const std::string& metrics) {
  nlohmann::json loss;
  for (const auto& r : test::read_jsonl(metrics))
    if (r["event"] == "eval") loss = r["test_loss"];
  return loss;
}

}  // namespace

TEST_CASE("recipe: on a CPU, every auto is decided with its reason", "[recipe]") {
  ResolvedConfig rc(Config{});
  Recipe r = resolve_recipe(rc, test::cpu_machine());
  CHECK_FALSE(r.cuda);
  CHECK(rc.resolved.device == "cpu");
  CHECK(rc.reason("device") == "no CUDA device");
  CHECK(rc.requested.device == "auto");  // the request is kept
  CHECK(r.threads == 2);
  CHECK(rc.resolved.threads == 2);
  CHECK_FALSE(r.precision.amp);
  CHECK_FALSE(rc.resolved.use_amp);
  CHECK_THAT(rc.reason("use_amp"), Catch::Contains("no native bf16"));
  CHECK_FALSE(rc.resolved.pin_memory);
  CHECK(r.channels_last);  // the default model is a cnn

  ResolvedConfig bf16(Config{});
  Recipe rb = resolve_recipe(bf16, test::cpu_machine(/*bf16=*/true));
  CHECK(rb.precision.amp);
  CHECK(rb.precision.dtype == c10::kBFloat16);
  CHECK(bf16.resolved.amp_dtype == "bf16");
  CHECK_FALSE(rb.precision.scaler);
}

TEST_CASE("recipe: GPUs decide AMP dtype, TF32 and the device", "[recipe]") {
  Config c;
  c.amp_dtype = "bf16";
  ResolvedConfig t4(c);
  Recipe r = resolve_recipe(t4, test::gpu_machine({test::t4()}));
  CHECK(r.cuda);
  CHECK(r.precision.dtype == c10::kHalf);  // bf16 asked, the T4 has none
  CHECK(r.precision.scaler);
  CHECK(t4.resolved.amp_dtype == "fp16");
  CHECK_THAT(t4.reason("amp_dtype"), Catch::Contains("Tesla T4"));
  CHECK_FALSE(r.tf32);
  CHECK_FALSE(t4.resolved.tf32);
  CHECK(r.cudnn_benchmark);
  CHECK(r.pin_memory);

  // auto and cuda take the GPU with the most free memory; cuda:N takes that one.
  auto two = test::gpu_machine({test::h100(0, 10LL << 30), test::h100(1, 70LL << 30)});
  ResolvedConfig a(Config{});
  CHECK(resolve_recipe(a, two).device.index() == 1);
  CHECK(a.resolved.device == "cuda:1");
  CHECK(a.resolved.amp_dtype == "bf16");
  CHECK(a.resolved.tf32);
  Config pinned;
  pinned.device = "cuda:0";
  ResolvedConfig p(pinned);
  CHECK(resolve_recipe(p, two).device.index() == 0);
  CHECK(p.reason("device").empty());  // given, not decided
  pinned.device = "cuda:5";
  ResolvedConfig missing(pinned);
  CHECK_THROWS_AS(resolve_recipe(missing, two), Error);
  ResolvedConfig no_gpu(pinned);
  CHECK_THROWS_AS(resolve_recipe(no_gpu, test::cpu_machine()), Error);
}

TEST_CASE("recipe: a GPU this torch has no kernels for is skipped, or refused when asked for", "[recipe]") {
  GpuInfo p100{0, "Tesla P100-PCIE-16GB", 16LL << 30, 16LL << 30, 6, 0, 56, false, false, /*kernels=*/false};
  // auto: one line at start, then the CPU (not a crash at the first kernel).
  ResolvedConfig a(Config{});
  std::string err;
  {
    test::CaptureStderr capture;
    Recipe r = resolve_recipe(a, test::gpu_machine({p100}));
    err = capture.text();
    CHECK_FALSE(r.cuda);
  }
  CHECK(a.resolved.device == "cpu");
  CHECK_THAT(a.reason("device"), Catch::Contains("Tesla P100-PCIE-16GB (sm_60) is not supported by this LibTorch"));
  CHECK_THAT(err, Catch::Contains("gputrain: cuda:0 Tesla P100-PCIE-16GB (sm_60) is not supported") &&
                      Catch::Contains("training on the CPU"));
  // Beside a T4, auto takes the T4 even with less free memory (2 GiB against 16).
  ResolvedConfig mixed(Config{});
  CHECK(resolve_recipe(mixed, test::gpu_machine({p100, test::t4(1, 2LL << 30)})).device.index() == 1);
  // Asked for by name: exit 2 with a hint, nothing started.
  for (const char* device : {"cuda", "cuda:0"}) {
    INFO(device);
    Config c;
    c.device = device;
    ResolvedConfig rc(c);
    try {
      resolve_recipe(rc, test::gpu_machine({p100}));
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(e.exit_code == 2);
      CHECK_THAT(e.problems[0], Catch::Contains("not supported by this LibTorch"));
      CHECK_THAT(e.hint, Catch::Contains("--device cpu"));
    }
  }
}

TEST_CASE("recipe: channels_last only for models with 2-D convolutions", "[recipe]") {
  for (const char* model : {"mlp", "lstm", "gru", "transformer", "cnn3d"}) {
    Config c;
    c.model = model;
    ResolvedConfig rc(c);
    Recipe r = resolve_recipe(rc, test::gpu_machine({test::h100()}));
    INFO(model);
    CHECK_FALSE(r.channels_last);
    CHECK_FALSE(rc.resolved.channels_last);
    CHECK_THAT(report_row(r, "channels_last"), Catch::StartsWith("n/a for"));
  }
  for (const char* model : {"cnn", "resnet18", "resnet50"}) {
    Config c;
    c.model = model;
    ResolvedConfig rc(c);
    CHECK(resolve_recipe(rc, test::gpu_machine({test::h100()})).channels_last);
  }
}

TEST_CASE("session: the resolved record is what the session runs", "[session]") {
  Config c = smoke();
  c.model = "resnet18";
  c.threads = 0;
  Session s(c);
  const Config& used = s.config();
  const nlohmann::json record = s.config_record();
  const auto& resolved = record["resolved"];
  // Device, threads and AMP as the recipe applied them.
  CHECK(resolved["device"] == s.recipe().device.str());
  CHECK(resolved["threads"] == at::get_num_threads());
  CHECK(resolved["use_amp"] == s.recipe().precision.amp);
  if (s.recipe().precision.amp) CHECK(resolved["amp_dtype"] == (s.recipe().precision.dtype == c10::kBFloat16 ? "bf16" : "fp16"));
  CHECK(record["requested"]["device"] == "auto");
  CHECK(record["requested"]["threads"] == 0);
  // Normalization as the data pipeline uses it, computed from the data.
  CHECK(resolved["normalize_mean"] == s.data().normalize_mean);
  CHECK(resolved["normalize_std"] == s.data().normalize_std);
  CHECK(record["requested"]["normalize_mean"] == "");
  CHECK_FALSE(used.normalize_mean.empty());
  // What the data decided: the task, the loss, the metric, the stem of a resnet on 16x16 images.
  CHECK(resolved["task"] == "classification");
  CHECK(resolved["loss"] == "cross_entropy");
  CHECK(resolved["monitor_metric"] == "accuracy");
  CHECK(resolved["stem"] == "small");
  CHECK(record["reasons"].contains("stem"));
  CHECK(s.monitored() == "accuracy");
  // The loaders use the resolved batch size and the recipe's memory format.
  CHECK(s.train_loader_options().batch_size == used.batch_size);
  CHECK(s.train_loader_options().channels_last == s.recipe().channels_last);
  CHECK_THAT(s.describe_line(), Catch::Contains("model resnet18, ") && Catch::Contains("data synthetic 1x16x16"));
}

TEST_CASE("session: values a run decided from its data stay pinned when it is reopened", "[session]") {
  Config c = smoke();
  Session first(c);
  nlohmann::json pinned = first.config_record()["resolved"];
  pinned["normalize_mean"] = "0.25";  // as if the run had seen other data
  pinned["normalize_std"] = "2";
  SessionOptions reopened;
  reopened.pinned = pinned;
  Session again(c, reopened);
  CHECK(again.config().normalize_mean == "0.25");
  CHECK(again.data().normalize_mean == "0.25");  // and the pipeline uses them
  CHECK(again.requested().normalize_mean.empty());
}

TEST_CASE("session: train, eval, infer and the benchmark's all variant build the same session", "[session][cli]") {
  test::TempDir dir;
  const std::string smoke = "--preset smoke --epochs 1 --num_workers 2";
  auto t = test::run_gputrain("train " + smoke + " --output_dir " + (dir / "run"));
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);
  const std::string trained = session_line(t.out);
  REQUIRE_FALSE(trained.empty());
  CHECK_THAT(trained, Catch::Contains("device cpu") && Catch::Contains("model cnn, ") &&
                          Catch::Contains("data synthetic") && Catch::Contains("channels_last on"));

  const std::string ckpt = dir / "run/checkpoints/last.pt";
  auto e = test::run_gputrain("eval --checkpoint " + ckpt);
  REQUIRE(e.exit_code == 0);
  CHECK(session_line(e.out) == trained);
  auto i = test::run_gputrain("infer --checkpoint " + ckpt);
  REQUIRE(i.exit_code == 0);
  CHECK(session_line(i.out) == trained);
  auto b = test::run_gputrain("benchmark " + smoke + " --variants all --warmup_steps 1 --steps 2");
  INFO(b.out << b.err);
  REQUIRE(b.exit_code == 0);
  CHECK(session_line(b.out, "session (all)") == trained);
  // The baseline turns the speed switches off: a different session.
  CHECK(session_line(b.out, "session (baseline)") != trained);

  // config.json: both halves; the resolved half is what the device report said ran.
  auto config = nlohmann::json::parse(test::read_file(dir / "run/config.json"));
  CHECK(config["requested"]["device"] == "auto");
  CHECK(config["resolved"]["device"] == "cpu");
  CHECK(config["reasons"]["device"] == "no CUDA device");
  const int threads = config["resolved"]["threads"].get<int>();
  CHECK_THAT(t.out, Catch::Contains("intra-op threads      " + std::to_string(threads)));
  CHECK_THAT(t.out, Catch::Contains("configuration (requested -> resolved):") &&
                        Catch::Contains("device                auto -> cpu (no CUDA device)"));
}

TEST_CASE("session: a resume decides machine-dependent values again", "[session][cli]") {
  test::TempDir dir;
  const std::string run = "train --preset smoke --output_dir " + (dir / "run");
  auto first = test::run_gputrain(run + " --epochs 1", "OMP_NUM_THREADS=2");
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  auto config = nlohmann::json::parse(test::read_file(dir / "run/config.json"));
  CHECK(config["resolved"]["threads"] == 2);
  CHECK(config["requested"]["threads"] == 0);

  // The same run continued on a "machine" with one thread: the checkpoint kept threads = 0
  // (auto), so the resume decides again.
  auto resumed = test::run_gputrain(run + " --epochs 2 --resume auto", "OMP_NUM_THREADS=1");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("resumed from"));
  CHECK_THAT(resumed.out, Catch::Contains(" 0 -> 1 (torch's default on this machine)"));
  // The checkpoint holds the request, "auto" and all, beside what the run resolved.
  auto stored = nlohmann::json::parse(read_checkpoint_meta(dir / "run/checkpoints/last.pt").config_json);
  CHECK(stored["requested"]["threads"] == 0);
  CHECK(stored["requested"]["device"] == "auto");
  CHECK(stored["resolved"]["device"] == "cpu");
  config = nlohmann::json::parse(test::read_file(dir / "run/config.json"));
  CHECK(config["resolved"]["threads"] == 1);
  CHECK(config["requested"]["threads"] == 0);
  CHECK(config["requested"]["epochs"] == 2);
  // Normalization statistics were decided from the data at the run's start and stay.
  CHECK(config["reasons"]["normalize_mean"] == "computed from the training data at the run's start");
}

TEST_CASE("session: --num_workers auto measures, says why, and trains as the chosen number would", "[session][cli]") {
  test::TempDir dir;
  const std::string flags = "train --preset smoke --epochs 1 --seed 5 --output_dir ";
  auto a = test::run_gputrain(flags + (dir / "auto") + " --num_workers auto");
  INFO(a.out << a.err);
  REQUIRE(a.exit_code == 0);
  auto config = nlohmann::json::parse(test::read_file(dir / "auto/config.json"));
  CHECK(config["requested"]["num_workers"] == "auto");
  const int64_t chosen = config["resolved"]["num_workers"].get<int64_t>();
  CHECK(chosen >= 0);
  CHECK_THAT(config["reasons"]["num_workers"].get<std::string>(),
             Catch::Contains("auto: data wait by loader threads 0: ") && Catch::Contains("the fewest under 5%"));
  CHECK_THAT(a.out, Catch::Contains("num_workers") && Catch::Contains("auto: data wait"));

  // The measurement ran real forward and backward passes: batch-norm statistics and the random
  // generators must be as if it had not (the same test loss as a run given the number).
  auto b = test::run_gputrain(flags + (dir / "fixed") + " --num_workers " + std::to_string(chosen));
  REQUIRE(b.exit_code == 0);
  CHECK(last_test_loss(dir / "auto/metrics.jsonl") == last_test_loss(dir / "fixed/metrics.jsonl"));

  auto bad = test::run_gputrain("train --preset smoke --num_workers many");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--num_workers") && Catch::Contains("an integer or auto"));
}

TEST_CASE("session: --prefetch_factor auto measures 1, 2 and 4 batches in flight, and trains as the chosen number would",
          "[session][cli]") {
  test::TempDir dir;
  const std::string flags = "train --preset smoke --epochs 1 --seed 5 --num_workers 1 --output_dir ";
  auto a = test::run_gputrain(flags + (dir / "auto") + " --prefetch_factor auto");
  INFO(a.out << a.err);
  REQUIRE(a.exit_code == 0);
  auto config = nlohmann::json::parse(test::read_file(dir / "auto/config.json"));
  CHECK(config["requested"]["prefetch_factor"] == "auto");
  CHECK(config["resolved"]["num_workers"] == 1);
  const int64_t chosen = config["resolved"]["prefetch_factor"].get<int64_t>();
  CHECK((chosen == 1 || chosen == 2 || chosen == 4));
  CHECK_THAT(config["reasons"]["prefetch_factor"].get<std::string>(),
             Catch::Contains("loader threads x batches in flight 1 x 1: ") && Catch::Contains("the fewest under 5%"));
  CHECK_FALSE(config["reasons"].contains("num_workers"));  // given, not measured

  auto b = test::run_gputrain(flags + (dir / "fixed") + " --prefetch_factor " + std::to_string(chosen));
  REQUIRE(b.exit_code == 0);
  CHECK(last_test_loss(dir / "auto/metrics.jsonl") == last_test_loss(dir / "fixed/metrics.jsonl"));

  // The main thread has nothing in flight: nothing is measured.
  auto main_thread = test::run_gputrain("train --preset smoke --epochs 1 --num_workers 0 --prefetch_factor auto --output_dir " +
                                        (dir / "main"));
  REQUIRE(main_thread.exit_code == 0);
  auto main_config = nlohmann::json::parse(test::read_file(dir / "main/config.json"));
  CHECK(main_config["resolved"]["prefetch_factor"] == 2);
  CHECK_THAT(main_config["reasons"]["prefetch_factor"].get<std::string>(), Catch::Contains("n/a with --num_workers 0"));
}

TEST_CASE("session: config.json of a run on every model family holds no auto: each value is decided or n/a with why",
          "[session][cli]") {
  test::TempDir dir;
  // One short run per family on synthetic samples of a rank it takes, then the variations that
  // leave parts out (no AMP) or add some (pipeline stages).
  std::vector<std::pair<std::string, std::string>> runs;
  std::vector<uint16_t> tokens(200);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i % 50);
  test::write_token_shard(dir / "tokens.bin", tokens);
  for (const auto& name : model_names()) {
    if (family(name).named_inputs) {  // token data, with its own preset (smoke's is synthetic)
      runs.emplace_back(name, "--preset gpt_cpu --eval_tokens 0 --eval_every 0 --train_file " + (dir / "tokens.bin") +
                                  " --vocab_size 50 --seq_len 8 --heads 2");
      continue;
    }
    const auto ranks = family(name).ranks;
    const size_t rank = ranks.empty() ? 1 : ranks.front();
    const std::string shape = rank == 1 ? "12" : rank == 2 ? "6x3" : rank == 3 ? "1x16x16" : "1x4x8x8";
    runs.emplace_back(name, "--model " + name + " --input_shape " + shape);
  }
  runs.emplace_back("mlp-no-amp", "--model mlp --input_shape 12 --no-use_amp");
  runs.emplace_back("mlp-stages", "--model mlp --input_shape 12 --pipeline_stages 2");
  runs.emplace_back("mlp-balance", "--model mlp --input_shape 12 --balance auto");
  for (const auto& [tag, flags] : runs) {
    INFO(tag);
    const std::string out = dir / tag;
    const std::string base = flags.find("--preset") == std::string::npos
                                 ? "--preset smoke --synthetic_train_size 64 --synthetic_test_size 16 "
                                 : "";
    auto r = test::run_gputrain("train --width 4 --epochs 1 --max_steps 1 --num_workers 0 " + base + flags +
                                " --output_dir " + out);
    REQUIRE(r.exit_code == 0);
    const auto record = nlohmann::json::parse(test::read_file(out + "/config.json"));
    for (const auto& [field, value] : record["resolved"].items()) {
      INFO(field);
      CHECK(value != "auto");
      if (value == "n/a") {
        REQUIRE(record["reasons"].contains(field));
        CHECK(record["reasons"][field] != "not used by this run");  // each has its own reason
      }
    }
    if (tag == "mlp") CHECK(record["resolved"]["stem"] == "n/a");
    if (tag == "mlp-no-amp") CHECK(record["resolved"]["amp_dtype"] == "n/a");
    if (tag == "mlp") CHECK(record["resolved"]["attention_precision"] == "n/a");
    // gpt under bf16 autocast on the CPU times its attention both ways; without bf16 it is n/a.
    if (tag == "gpt") CHECK_THAT(r.out, Catch::Contains("attention kernel") && Catch::Contains("(at::_fused_sdp_choice, 1 x 2 heads x 8 x 2"));
    if (tag == "gpt")
      CHECK_THAT(record["reasons"]["attention_precision"].get<std::string>(),
                 Catch::Contains(record["resolved"]["use_amp"] == true ? "ms in fp32" : "n/a without autocast"));
    if (tag == "mlp-stages") CHECK(record["resolved"]["micro_batches"] == 8);  // auto: 4 per stage
    if (tag == "mlp-balance") CHECK(record["reasons"]["balance"] == "one process: nothing to balance");
    // The printed table says the same.
    if (tag == "mlp") CHECK_THAT(r.out, Catch::Contains("stem                  auto -> n/a"));
  }
}
