// --amp_check and the AMP fallback: the check compares real fp32 and bf16 passes (runs here)
// and leaves the run as it found it; failures fall back fp16 -> bf16 -> fp32 with the reason in
// the device report; a collapsed loss scale falls back mid-run and the resume keeps it ([cuda]).
#include <catch2/catch.hpp>

#include <ATen/Context.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "config/config.h"
#include "test_machines.h"
#include "test_util.h"
#include "train/amp_check.h"
#include "step/optimizer.h"
#include "train/resolve_recipe.h"
#include "step/trainer.h"
#include "test_trainer.h"

using namespace gputrain;

namespace {

Trainer make_trainer(bool grad_scaler, const std::string& model = "cnn") {
  torch::manual_seed(3);
  Config c;
  c.optimizer = "adamw";
  c.lr = 0.01;
  auto net = make_model(model, ModelSpec{{1, 12, 12}, 5, 8});
  Recipe& r = test::keep({});
  r.precision.amp = true;
  r.precision.dtype = torch::kBFloat16;
  r.precision.scaler = grad_scaler;
  return Trainer(net, make_optimizer(optimizer_spec(c, true), *net), r, TrainerOptions{});
}

Batch make_batch(int64_t n = 24) {
  torch::manual_seed(11);
  return {torch::randn({n, 1, 12, 12}), torch::randint(0, 5, {n})};
}

std::vector<torch::Tensor> state_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> v;
  for (const auto& p : m.parameters()) v.push_back(p.detach().clone());
  for (const auto& b : m.buffers()) v.push_back(b.detach().clone());
  return v;
}

std::string row(const Recipe& r, const std::string& what) {
  for (const auto& [name, state] : r.report)
    if (name == what) return state;
  return "";
}

}  // namespace

TEST_CASE("amp check: bf16 agrees with fp32 within tolerance, and the run is left as it was", "[amp]") {
  for (bool scaled : {false, true}) {
    INFO((scaled ? "with loss scaling" : "unscaled"));
    Trainer t = make_trainer(false);
    const Batch batch = make_batch();
    const auto before = state_of(t.model());
    const auto rng = at::globalContext().defaultGenerator(torch::kCPU).get_state();
    AmpCheckResult r = check_amp(t, batch, torch::kBFloat16, scaled, {.lr = 0.1});
    INFO(r.summary);
    CHECK(r.ok);
    CHECK(r.samples == 16);  // max_samples of the 24
    CHECK(r.loss_diff > 0);  // two real passes: bf16 rounds differently from fp32
    CHECK(r.loss_diff < 0.05);
    CHECK(r.grad_ratio != 1);
    CHECK(r.grad_ratio > 0.5);
    CHECK(r.grad_ratio < 2);
    CHECK_THAT(r.summary, Catch::StartsWith("bf16 within") && Catch::Contains("(3 steps, 16 samples)"));
    // Weights, batch-norm statistics, gradients and the generator as before.
    const auto after = state_of(t.model());
    for (size_t i = 0; i < before.size(); ++i) CHECK(torch::equal(before[i], after[i]));
    for (const auto& p : t.model().parameters()) CHECK_FALSE(p.grad().defined());
    CHECK(torch::equal(rng, at::globalContext().defaultGenerator(torch::kCPU).get_state()));
  }
}

TEST_CASE("amp check: beyond tolerance or not finite fails, fp32 not finite is not judged", "[amp]") {
  Trainer t = make_trainer(false);
  AmpCheckResult tight = check_amp(t, make_batch(), torch::kBFloat16, false, {.loss_tolerance = 0});
  CHECK_FALSE(tight.ok);
  CHECK_THAT(tight.summary, Catch::StartsWith("bf16 differs from fp32 by") && Catch::Contains("(tolerance 0%)"));
  AmpCheckResult norm = check_amp(t, make_batch(), torch::kBFloat16, false, {.grad_ratio_tolerance = 1});
  CHECK_FALSE(norm.ok);
  CHECK_THAT(norm.summary, Catch::Contains("(tolerance 1x)"));

  Batch nan = make_batch();
  nan.x()[0].fill_(std::nan(""));
  AmpCheckResult both = check_amp(t, nan, torch::kBFloat16, false);
  CHECK(both.ok);
  CHECK_THAT(both.summary, Catch::Contains("not judged: the fp32 loss or gradient is not finite too"));
}

TEST_CASE("amp fallback: fp16 -> bf16 where the GPU has it, else fp32, and bf16 -> fp32", "[amp][recipe]") {
  Config c;
  c.amp_dtype = "fp16";
  ResolvedConfig h(c);
  Recipe r = resolve_recipe(h, test::gpu_machine({test::h100()}));
  REQUIRE(r.precision.scaler);
  CHECK(fall_back_precision(h, r, test::gpu_machine({test::h100()}), "the check failed") == "bf16");
  CHECK(r.precision.amp);
  CHECK(r.precision.dtype == torch::kBFloat16);
  CHECK_FALSE(r.precision.scaler);
  CHECK(h.resolved.amp_dtype == "bf16");
  CHECK(h.reason("amp_dtype") == "fp16 fell back to bf16: the check failed");
  CHECK(row(r, "AMP") == "on (bf16 autocast; fp16 fell back to bf16: the check failed)");
  // bf16 failing too ends in fp32.
  CHECK(fall_back_precision(h, r, test::gpu_machine({test::h100()}), "again") == "fp32");
  CHECK_FALSE(r.precision.amp);
  CHECK(h.resolved.use_amp == false);
  CHECK(h.reason("use_amp") == "bf16 fell back to fp32: again");

  ResolvedConfig t4(Config{});
  Recipe rt = resolve_recipe(t4, test::gpu_machine({test::t4()}));
  REQUIRE(rt.precision.dtype == torch::kHalf);
  CHECK(fall_back_precision(t4, rt, test::gpu_machine({test::t4()}), "scale collapsed") == "fp32");
  CHECK(row(rt, "AMP") == "off (fp32; fp16 fell back to fp32: scale collapsed)");
}

TEST_CASE("amp fallback: the Trainer switches precision mid-run and drops its grad scaler", "[amp]") {
  Trainer t = make_trainer(/*grad_scaler=*/true);
  REQUIRE(t.scaler().enabled());
  const Batch b = make_batch(8);
  StepResult s = t.step({b});
  CHECK(s.skipped.defined());
  // The run's recipe changes (Session::fall_back_amp): the Trainer reads it by reference.
  const_cast<Recipe&>(t.context()).precision = Precision{};
  t.precision_changed();
  CHECK_FALSE(t.scaler().enabled());
  CHECK_FALSE(t.context().precision.amp);
  s = t.step({b});
  CHECK_FALSE(s.skipped.defined());
  CHECK(std::isfinite(s.loss.item<double>()));
}

TEST_CASE("amp check: the CLI reports the check, and a failed check falls back and trains", "[amp][cli]") {
  test::TempDir dir;
  const std::string flags = "train --preset smoke --epochs 1 --amp_dtype bf16 --output_dir ";
  auto ok = test::run_gputrain(flags + (dir / "ok"));
  INFO(ok.out << ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("AMP check             bf16 within"));

  auto off = test::run_gputrain(flags + (dir / "off") + " --no-amp_check");
  REQUIRE(off.exit_code == 0);
  CHECK_THAT(off.out, !Catch::Contains("AMP check"));

  auto bad = test::run_gputrain(flags + (dir / "bad"), "GPUTRAIN_FAULT_AMP_CHECK=1");
  INFO(bad.out << bad.err);
  REQUIRE(bad.exit_code == 0);
  CHECK_THAT(bad.out, Catch::Contains("off (fp32; bf16 fell back to fp32: the AMP check: the bf16 loss is not finite"));
  auto config = nlohmann::json::parse(test::read_file(dir / "bad/config.json"));
  CHECK(config["resolved"]["use_amp"] == false);
  CHECK_THAT(config["reasons"]["use_amp"].get<std::string>(), Catch::StartsWith("bf16 fell back to fp32"));
}

TEST_CASE("cuda: a collapsed fp16 loss scale falls back mid-run, and the resume keeps the fallback", "[cuda]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  // From step 3 every fp16 gradient overflows: the scale halves each step, 65536 -> below 1
  // after 17 skipped steps; the log step after that falls back.
  auto r = test::run_gputrain("train --preset smoke --epochs 2 --device cuda --amp_dtype fp16 --log_every 4 --output_dir " + run,
                              "GPUTRAIN_FAULT_OVERFLOW_STEP=3");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("mixed precision: fp16 ->") && Catch::Contains("the loss scale collapsed"));
  nlohmann::json fallback;
  for (const auto& rec : test::read_jsonl(run + "/metrics.jsonl"))
    if (rec["event"] == "amp_fallback") fallback = rec;
  REQUIRE(fallback.is_object());
  CHECK(fallback["from"] == "fp16");
  CHECK(fallback["step"].get<int64_t>() >= 19);
  auto resumed = test::run_gputrain("train --output_dir " + run + " --resume auto --epochs 3",
                                    "GPUTRAIN_FAULT_OVERFLOW_STEP=3");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("fp16 fell back to") && Catch::Contains("(earlier in this run)"));
}
