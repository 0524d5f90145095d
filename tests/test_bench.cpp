// gputrain benchmark: variant expansion and skip reasons, and a short real run on CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/variants.h"
#include "core/error.h"
#include "test_machines.h"
#include "test_util.h"

using namespace gputrain;

namespace {

const Variant& find(const std::vector<Variant>& vs, const std::string& name) {
  auto it = std::find_if(vs.begin(), vs.end(), [&](const Variant& v) { return v.name == name; });
  REQUIRE(it != vs.end());
  return *it;
}

}  // namespace

TEST_CASE("bench: the baseline turns every optimization off", "[bench]") {
  Config w;
  Config b = baseline_config(w);
  CHECK_FALSE(b.use_amp);
  CHECK_FALSE(b.cudnn_benchmark);
  CHECK_FALSE(b.tf32);
  CHECK_FALSE(b.channels_last);
  CHECK(b.num_workers == 0);
  CHECK_FALSE(b.pin_memory);
  CHECK_FALSE(b.non_blocking);
  CHECK(b.batch_size == w.batch_size);
}

TEST_CASE("bench: variants on a CPU say why they are skipped", "[bench]") {
  Config w;
  auto vs = expand_variants(w, {}, test::cpu_machine());
  CHECK(vs.size() == variant_names().size());
  CHECK(vs.front().name == "baseline");
  CHECK(vs.back().name == "all_cuda_graphs");
  CHECK(vs.back().skipped == "n/a on cpu");
  CHECK_THAT(find(vs, "amp_fp16").skipped, Catch::Contains("fp16 autocast n/a on cpu"));
  CHECK_THAT(find(vs, "cudnn_benchmark").skipped, Catch::Contains("n/a on cpu"));
  CHECK(find(vs, "tf32").skipped == "n/a on cpu");
  CHECK_THAT(find(vs, "pinned_non_blocking").skipped, Catch::Contains("n/a on cpu"));
  CHECK(find(vs, "cuda_graphs").skipped == "n/a on cpu");
  CHECK(find(vs, "amp_bf16").skipped.empty());
  CHECK(find(vs, "workers").config.num_workers >= 2);
  CHECK(find(vs, "batch_x2").config.batch_size == 2 * w.batch_size);
  const Config& all = find(vs, "all").resolved;
  CHECK(all.channels_last);
  CHECK(all.num_workers >= 2);
  CHECK_FALSE(all.use_amp);  // auto AMP is off on a CPU without native bf16
  CHECK(all.batch_size == w.batch_size);
  auto bf16_cpu = expand_variants(w, {}, test::cpu_machine(/*bf16=*/true));
  CHECK(find(bf16_cpu, "all").resolved.use_amp);
  CHECK(find(bf16_cpu, "all").resolved.amp_dtype == "bf16");
}

TEST_CASE("bench: GPU capabilities decide AMP dtype and TF32", "[bench]") {
  Config w;
  auto vs = expand_variants(w, {}, test::gpu_machine({test::t4()}));
  CHECK_THAT(find(vs, "amp_bf16").skipped, Catch::Contains("bf16 n/a on Tesla T4: needs compute capability 8.0+"));
  CHECK_THAT(find(vs, "tf32").skipped, Catch::Contains("Tesla T4"));
  CHECK(find(vs, "all").resolved.amp_dtype == "fp16");
  CHECK(find(vs, "all").resolved.cudnn_benchmark);
  CHECK(find(vs, "all").resolved.pin_memory);

  auto hv = expand_variants(w, {}, test::gpu_machine({test::h100()}));
  CHECK(find(hv, "all").resolved.amp_dtype == "bf16");
  CHECK(find(hv, "all").resolved.tf32);
  for (const auto& v : hv) CHECK((v.skipped.empty() || v.name == "grad_checkpointing" || v.name == "fused_head_loss"));
  CHECK(find(hv, "cuda_graphs").resolved.cuda_graphs);
  CHECK(find(hv, "cuda_graphs").resolved.fused_optimizer == "on");
  CHECK_FALSE(find(hv, "all").resolved.cuda_graphs);  // not a default until GPU runs have proven it
  const Config& graphs = find(hv, "all_cuda_graphs").resolved;
  CHECK(graphs.cuda_graphs);
  CHECK(graphs.channels_last == find(hv, "all").resolved.channels_last);
  CHECK(graphs.amp_dtype == "bf16");
  CHECK(find(hv, "grad_checkpointing").skipped == "n/a for cnn (no residual blocks or encoder layers)");
  CHECK(find(hv, "fused_head_loss").skipped == "n/a for cnn (no language-model head)");
  CHECK_FALSE(find(hv, "all").resolved.fused_head_loss);  // decided off: nothing to fuse

  w.model = "gpt";  // a language model: the variant runs, and "all" (train's recipe) has it
  auto gv = expand_variants(w, {"fused_head_loss", "all"}, test::gpu_machine({test::h100()}));
  CHECK(find(gv, "fused_head_loss").skipped.empty());
  CHECK_FALSE(find(gv, "baseline").resolved.fused_head_loss);
  CHECK(find(gv, "all").resolved.fused_head_loss);
}

TEST_CASE("bench: channels_last is skipped for models without 2-D convolutions", "[bench]") {
  Config w;
  w.model = "lstm";
  auto vs = expand_variants(w, {"channels_last"}, test::gpu_machine({test::h100()}));
  CHECK(find(vs, "channels_last").skipped == "n/a for lstm (no 2-D convolutions)");
}

TEST_CASE("bench: --variants picks a subset, always with the baseline, typos are errors", "[bench]") {
  auto vs = expand_variants(Config{}, {"channels_last", "all"}, test::cpu_machine());
  REQUIRE(vs.size() == 3);
  CHECK(vs[0].name == "baseline");
  CHECK(vs[1].name == "channels_last");
  try {
    expand_variants(Config{}, {"chanels_last", "fastest"}, test::cpu_machine());
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.exit_code == 2);
    REQUIRE(e.problems.size() == 2);
    CHECK_THAT(e.problems[0], Catch::Contains("did you mean 'channels_last'"));
  }
}

TEST_CASE("bench: a short real run on CPU gives a sane table and files", "[bench][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain("benchmark --preset smoke --warmup_steps 1 --steps 3 --json " + (dir / "b.json") +
                              " --csv " + (dir / "b.csv") + " --markdown " + (dir / "b.md"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Optimization") && Catch::Contains("Speedup") &&
                        Catch::Contains("skipped: n/a on cpu") && Catch::Contains("bottleneck (all): "));
  CHECK_THAT(r.err, Catch::Contains("benchmark: variant 1/15 baseline"));

  auto j = nlohmann::json::parse(test::read_file(dir / "b.json"));
  for (const char* key : {"device", "workload", "settings", "variants", "memory_kind", "verdict"})
    CHECK(j.contains(key));
  CHECK(j["workload"]["preset"] == "smoke");
  CHECK(j["settings"]["steps"] == 3);
  REQUIRE(j["variants"].size() == 15);
  CHECK(j["variants"][0]["name"] == "baseline");
  CHECK(j["variants"][0]["speedup"].get<double>() == 1.0);
  int ran = 0;
  for (const auto& v : j["variants"]) {
    INFO(v.dump());
    if (v["status"] == "skipped") {
      CHECK_FALSE(v["reason"].get<std::string>().empty());
      continue;
    }
    ++ran;
    CHECK(v["samples_per_sec"].get<double>() > 0);
    CHECK(v["median_ms"].get<double>() > 0);
    CHECK(v["p90_ms"].get<double>() >= v["median_ms"].get<double>());
    CHECK(v["peak_memory_bytes"].get<double>() > 0);
    CHECK(v["step_ms"].size() == 3);
    CHECK(v["loss"].get<double>() > 0);
    CHECK(v["data_wait_fraction"].get<double>() >= 0);
    // MFU: the model's training FLOPs over the peak at the variant's precision. Every fp32
    // variant runs the same FLOPs a sample against the same peak: one MFU per sample/s. (None
    // where the host's clock, and so its peak, is unknown.)
    if (j["device"]["peak rate (MFU)"].get<std::string>().find("TFLOP/s") == std::string::npos) continue;
    REQUIRE(v.contains("mfu"));
    CHECK(v["mfu"].get<double>() > 0);
    CHECK(v["mfu"].get<double>() < 1);
    if (!v["switches"]["use_amp"].get<bool>())
      CHECK(v["mfu"].get<double>() / v["samples_per_sec"].get<double>() ==
            Approx(j["variants"][0]["mfu"].get<double>() / j["variants"][0]["samples_per_sec"].get<double>())
                .epsilon(1e-9));
  }
  CHECK(ran == 7);  // baseline, amp_bf16, channels_last, fused_optimizer, workers, batch_x2, all

  std::istringstream csv(test::read_file(dir / "b.csv"));
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  CHECK(lines == 16);  // a header and one row per variant
  CHECK_THAT(test::read_file(dir / "b.md"), Catch::Contains("| Optimization | samples/s |"));
}

TEST_CASE("bench: bad benchmark flags exit 2 with every problem", "[bench][cli]") {
  auto r = test::run_gputrain("benchmark --preset smoke --steps 0 --variants fastest --stage gpu --bogus");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--steps has value '0'"));
  CHECK_THAT(r.err, Catch::Contains("stage 'gpu'"));
  CHECK_THAT(r.err, Catch::Contains("unknown variant 'fastest'"));
  CHECK_THAT(r.err, Catch::Contains("unknown flag '--bogus'"));
}

TEST_CASE("bench: outputs are rewritten after each variant, and SIGINT keeps them and prints the partial table",
          "[bench][cli]") {
  test::TempDir dir;
  // SIGINT once the first variant's figures are on disk.
  const std::string json = dir / "b.json";
  const auto r = test::interrupt_gputrain_when(
      "benchmark --preset smoke --warmup_steps 1 --steps 150 --json " + json + " --markdown " + (dir / "b.md"), json);
  const std::string& out = r.out;
  INFO(out);
  CHECK(r.exit_code == 130);
  auto j = nlohmann::json::parse(test::read_file(json));
  REQUIRE(j["variants"].size() >= 1);
  CHECK(j["variants"].size() < 13);
  CHECK(j["variants"][0]["name"] == "baseline");
  CHECK_THAT(j["verdict"].get<std::string>(), Catch::StartsWith("partial: ") && Catch::EndsWith("(stopped by SIGINT)"));
  CHECK_THAT(out, Catch::Contains("Optimization") && Catch::Contains("stopped by SIGINT"));
  CHECK_THAT(test::read_file(dir / "b.md"), Catch::Contains("baseline"));
}
