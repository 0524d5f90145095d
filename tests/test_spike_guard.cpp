// --skip_spikes F, the step engine's loss-spike guard: a step whose loss exceeds F x the running
// mean is not applied, exactly as if its batch had been left out; the mean is step state, so a
// run killed after a skipped step resumes to the uninterrupted run's losses.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "step/trainer.h"
#include "test_trainer.h"
#include "test_util.h"

using namespace gputrain;

namespace {

std::unique_ptr<Trainer> make_trainer(const std::string& optimizer, bool fused, double skip_spikes) {
  torch::manual_seed(3);
  auto model = make_model("mlp", ModelSpec{{1, 6, 6}, 5, 16});
  Config c;
  c.optimizer = optimizer;
  c.lr = 0.05;
  c.momentum = 0.9;
  TrainerOptions options;
  options.skip_spikes = skip_spikes;
  return std::make_unique<Trainer>(model, make_optimizer(optimizer_spec(c, fused), *model), test::keep({}), options);
}

Batch batch_of(int64_t seed, double scale = 1) {
  torch::manual_seed(seed);
  return {torch::randn({16, 1, 6, 6}) * scale, torch::randint(0, 5, {16})};
}

torch::Tensor flat(Trainer& t) {
  std::vector<torch::Tensor> v;
  for (auto& p : t.model().parameters()) v.push_back(p.detach().flatten().clone());
  return torch::cat(v);
}

// Step losses by step, and the last skipped_steps figure, from a run's metrics.jsonl.
std::pair<std::map<int64_t, double>, int64_t> losses(const std::string& path) {
  std::map<int64_t, double> loss;
  int64_t skipped = 0;
  std::istringstream in(test::read_file(path));
  for (std::string line; std::getline(in, line);) {
    auto r = nlohmann::json::parse(line);
    if (r["event"] != "step") continue;
    loss[r["step"].get<int64_t>()] = r["loss"].get<double>();
    skipped = r.value("skipped_steps", skipped);
  }
  return {loss, skipped};
}

}  // namespace

TEST_CASE("spike guard: a spike's update is skipped as if its batch were left out", "[numerics]") {
  for (auto [optimizer, fused] : {std::pair{"sgd", false}, {"sgd", true}, {"adamw", false}, {"adamw", true}}) {
    INFO(optimizer << (fused ? " fused" : ""));
    auto guarded = make_trainer(optimizer, fused, 3.0), control = make_trainer(optimizer, fused, 0);
    for (int s = 0; s < 16; ++s) {
      const bool spike = s == 12;  // after the guard's 10-step warm-up
      const Batch b = batch_of(100 + s, spike ? 1000 : 1);
      const StepResult r = guarded->step({b});
      REQUIRE(r.skipped.defined());
      CHECK(r.skipped.item<double>() == (spike ? 1 : 0));
      if (!spike) control->step({b});
    }
    CHECK(torch::equal(flat(*guarded), flat(*control)));
    // The spike stayed out of the running mean: 15 losses were taken into it.
    const StepState state = guarded->step_state();
    REQUIRE(state.size() == 2);
    CHECK(state[1].first == "spike_guard.count");
    CHECK(state[1].second.item<double>() == 15);
  }
}

TEST_CASE("spike guard: --skip_spikes at or below 1, or with data parallel, is exit 2 naming the flag", "[cli]") {
  auto r = test::run_gputrain("train --preset smoke --skip_spikes 1 --output_dir /nonexistent/never");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("skip_spikes '1'") && Catch::Contains("above 1"));
  // Each rank would judge its own share of the loss, and the ranks would skip different steps.
  test::TempDir dir;
  auto ranks = test::run_gputrain("launch --nproc_per_node 2 -- train --preset smoke --skip_spikes 3 --output_dir " +
                                  (dir / "run"));
  CHECK(ranks.exit_code == 2);
  CHECK_THAT(ranks.err, Catch::Contains("--skip_spikes 3 with data parallel (2 ranks)"));
}

TEST_CASE("spike guard: a run stopped after a skipped spike resumes to the uninterrupted run's losses", "[resilience]") {
  test::TempDir dir;
  // smoke: 16 steps per epoch, 48 in all; spikes at steps 15, 30 and 45 (inputs x -1000: an MLP
  // has no normalization to absorb them). The stop comes after step 20: the spike at 30 is only
  // judged if the resumed guard has its mean back (a fresh one would still be warming up, 9 steps in).
  const std::string flags = "--preset smoke --model mlp --epochs 3 --log_every 1 --deterministic --skip_spikes 3";
  const std::string spikes = "GPUTRAIN_FAULT_SPIKE_EVERY=15";
  auto ref = test::run_gputrain("train " + flags + " --output_dir " + (dir / "ref"), spikes);
  INFO(ref.out << ref.err);
  REQUIRE(ref.exit_code == 0);
  const auto [ref_loss, ref_skipped] = losses(dir / "ref/metrics.jsonl");
  CHECK(ref_skipped == 3);

  auto stopped = test::run_gputrain("train " + flags + " --output_dir " + (dir / "run"),
                                    spikes + " GPUTRAIN_FAULT_SIGTERM_STEP=20");
  INFO(stopped.out << stopped.err);
  REQUIRE(stopped.exit_code == 143);
  auto resumed = test::run_gputrain("train " + flags + " --output_dir " + (dir / "run") + " --resume auto", spikes);
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const auto [loss, skipped] = losses(dir / "run/metrics.jsonl");
  CHECK(skipped == 2);  // this process's: the spikes at 30 and 45
  REQUIRE(loss.size() == ref_loss.size());
  for (const auto& [step, l] : ref_loss) {
    INFO("step " << step);
    CHECK(loss.at(step) == l);  // bit-identical on CPU
  }
}

TEST_CASE("cuda: the spike guard decides on the device, so a replayed CUDA-graph step skips a spike as the eager one does",
          "[cuda]") {
  const torch::Device gpu(torch::kCUDA, 0);
  at::globalContext().setDeterministicCuDNN(true);
  auto make = [&](bool graphs) {
    torch::manual_seed(3);
    auto model = make_model("mlp", ModelSpec{{1, 6, 6}, 5, 16});
    model->to(gpu);
    Recipe& r = test::keep({});
    r.device = gpu;
    r.cuda = r.fused_optimizer = true;
    r.cuda_graphs = graphs;
    Config c;
    TrainerOptions options;
    options.skip_spikes = 3;
    return std::make_unique<Trainer>(model, make_optimizer(optimizer_spec(c, true), *model), r, options);
  };
  auto eager = make(false), graphed = make(true);
  for (int s = 0; s < 16; ++s) {
    const bool spike = s == 12;  // replayed: 3 warm-ups, the capture, then replays
    Batch b = batch_of(100 + s, spike ? 1000 : 1);
    b = {b.x().to(gpu), b.y().to(gpu)};
    const auto e = eager->step({b}), g = graphed->step({b});
    CHECK(e.skipped.item<double>() == (spike ? 1 : 0));
    CHECK(g.skipped.item<double>() == (spike ? 1 : 0));
    CHECK(graphed->replayed() == (s >= 3));
  }
  CHECK(torch::allclose(flat(*eager), flat(*graphed), 1e-6, 1e-7));
}
