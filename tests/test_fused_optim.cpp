// Fused optimizers: the same numbers as torch::optim, an overflow step skipped on the device,
// unscaling folded into the update, and checkpoints that either kind resumes.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "config/config.h"
#include "core/device_cuda.h"
#include "step/trainer.h"
#include "step/fused_optim.h"
#include "step/grad_scaler.h"
#include "step/optimizer.h"
#include "train/optimizer_state.h"
#include "train/state_memory.h"
#include "test_util.h"
#include "test_trainer.h"

using namespace gputrain;

namespace {

struct Setup {
  NetPtr model;
  std::unique_ptr<Optimizer> optimizer;
};

Config optimizer_config(const std::string& name) {
  Config c;
  c.optimizer = name;
  c.lr = 0.05;
  c.weight_decay = 0.01;
  c.momentum = 0.9;
  c.nesterov = name == "sgd";
  return c;
}

Setup make(const std::string& name, bool fused) {
  torch::manual_seed(11);  // the same initial weights for both kinds
  auto model = make_model("mlp", ModelSpec{{1, 4, 4}, 3, 8});
  auto optimizer = make_optimizer(optimizer_spec(optimizer_config(name), fused), *model);
  return {model, std::move(optimizer)};
}

// The same made-up gradients for step k, times `scale`.
void set_grads(Net& model, int k, double scale = 1.0) {
  torch::manual_seed(100 + k);
  for (auto& p : model.parameters()) p.mutable_grad() = torch::randn_like(p) * scale;
}

torch::Tensor flat(Net& model) {
  std::vector<torch::Tensor> v;
  for (auto& p : model.parameters()) v.push_back(p.detach().flatten().clone());
  return torch::cat(v);
}

}  // namespace

TEST_CASE("fused optimizers: the same weights as torch::optim after several steps", "[fused]") {
  for (const std::string name : {"adamw", "adam", "sgd"}) {
    INFO(name);
    auto plain = make(name, false), fused = make(name, true);
    REQUIRE(fused.optimizer->fused());
    for (int k = 0; k < 6; ++k) {
      set_grads(*plain.model, k);
      set_grads(*fused.model, k);
      plain.optimizer->step();
      fused.optimizer->step();
    }
    auto a = flat(*plain.model), b = flat(*fused.model);
    CHECK(torch::allclose(a, b, /*rtol=*/1e-5, /*atol=*/1e-6));
    CHECK((a - flat(*make(name, false).model)).abs().max().item<double>() > 1e-3);  // they did move
  }
}

TEST_CASE("fused optimizers: 50 steps of every optimizer and option, an overflow step included, follow torch::optim",
          "[fused]") {
  struct Case {
    std::string optimizer;
    double weight_decay, momentum = 0;
    bool nesterov = false;
    double beta1 = 0.9, beta2 = 0.999;
  };
  const std::vector<Case> cases = {
      {"sgd", 0},          {"sgd", 0.01, 0.9},        {"sgd", 0.01, 0.9, true},          {"adam", 0},
      {"adam", 0.01},      {"adam", 0, 0, false, 0.8, 0.95}, {"adamw", 0.01}, {"adamw", 0.1, 0, false, 0.8, 0.95},
  };
  for (const auto& k : cases) {
    INFO(k.optimizer << " weight_decay " << k.weight_decay << " momentum " << k.momentum << " nesterov " << k.nesterov
                     << " betas " << k.beta1 << "," << k.beta2);
    Config c;
    c.optimizer = k.optimizer;
    c.lr = 0.01;
    c.weight_decay = k.weight_decay;
    c.momentum = k.momentum;
    c.nesterov = k.nesterov;
    c.beta1 = k.beta1;
    c.beta2 = k.beta2;
    auto build = [&](bool fused) {
      torch::manual_seed(11);
      auto model = make_model("mlp", ModelSpec{{1, 4, 4}, 3, 8});
      auto optimizer = make_optimizer(optimizer_spec(c, fused), *model);
      return Setup{model, std::move(optimizer)};
    };
    // The control: torch::optim behind the grad scaler (unscale, then step unless inf), as
    // in PyTorch; the fused kind gets the scale and the overflow flag inside its kernel.
    auto plain = build(false), fused = build(true);
    REQUIRE(fused.optimizer->fused());
    GradScaler plain_scaler(true, torch::kCPU), fused_scaler(true, torch::kCPU);
    for (int step = 0; step < 50; ++step) {
      set_grads(*plain.model, step, plain_scaler.get_scale());
      set_grads(*fused.model, step, fused_scaler.get_scale());
      const bool overflow = step == 20;
      if (overflow) {
        plain.model->parameters()[1].mutable_grad()[0] = std::numeric_limits<float>::infinity();
        fused.model->parameters()[1].mutable_grad()[0] = std::numeric_limits<float>::infinity();
      }
      const auto before = flat(*fused.model);
      CHECK(plain_scaler.step(*plain.optimizer).item<float>() == (overflow ? 1 : 0));
      CHECK(fused_scaler.step(*fused.optimizer).item<float>() == (overflow ? 1 : 0));
      plain_scaler.update();
      fused_scaler.update();
      if (overflow) CHECK(torch::equal(flat(*fused.model), before));  // skipped on the device
    }
    CHECK(fused_scaler.get_scale() == plain_scaler.get_scale());
    auto a = flat(*plain.model), b = flat(*fused.model);
    CHECK(torch::allclose(a, b, /*rtol=*/1e-5, /*atol=*/1e-6));
    CHECK((a - flat(*build(false).model)).abs().max().item<double>() > 1e-3);  // they did move
  }
}

TEST_CASE("fused optimizers: found_inf skips the step on the device, grad_scale unscales inside it", "[fused]") {
  for (const std::string name : {"adamw", "sgd"}) {
    INFO(name);
    auto reference = make(name, true), scaled = make(name, true);
    set_grads(*reference.model, 0);
    reference.optimizer->step();
    // An overflow step first: nothing moves, and the step count does not advance.
    set_grads(*scaled.model, 0, 1000.0);
    const auto before = flat(*scaled.model);
    scaled.optimizer->set_scaler_inputs(torch::full({1}, 1000.0), torch::ones({1}));
    scaled.optimizer->step();
    CHECK(torch::equal(flat(*scaled.model), before));
    // Then the same gradients scaled by 1000, with the scale handed over: as the reference.
    set_grads(*scaled.model, 0, 1000.0);
    scaled.optimizer->set_scaler_inputs(torch::full({1}, 1000.0), torch::zeros({1}));
    scaled.optimizer->step();
    CHECK(torch::allclose(flat(*scaled.model), flat(*reference.model), 1e-5, 1e-6));
  }
}

TEST_CASE("fused optimizers: the grad scaler skips an overflow and the count stays right", "[fused]") {
  auto s = make("adamw", true);
  GradScaler scaler(true, torch::kCPU);
  set_grads(*s.model, 0);
  s.model->parameters()[0].mutable_grad()[0] = std::numeric_limits<float>::infinity();
  const auto before = flat(*s.model);
  CHECK(scaler.step(*s.optimizer).item<float>() == 1);
  scaler.update();
  CHECK(torch::equal(flat(*s.model), before));
  CHECK(scaler.get_scale() == 32768.0);
  set_grads(*s.model, 1, scaler.get_scale());
  CHECK(scaler.step(*s.optimizer).item<float>() == 0);
  scaler.update();
  CHECK_FALSE(torch::equal(flat(*s.model), before));
  // Saved, the state counts one step (the skipped one does not count), as torch::optim would.
  auto plain = make("adamw", false);
  apply_optimizer_state(*plain.optimizer, capture_optimizer_state(*s.optimizer));
  for (const auto& [key, state] : plain.optimizer->state())
    CHECK(static_cast<torch::optim::AdamWParamState&>(*state).step() == 1);
}

TEST_CASE("fused optimizers: a checkpoint of either kind resumes in the other", "[fused]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  auto first = test::run_gputrain("train --preset smoke --epochs 1 --fused_optimizer off --output_dir " + run);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Catch::Contains("fused optimizer") && Catch::Contains("off (--fused_optimizer off)"));
  auto second = test::run_gputrain("train --output_dir " + run + " --resume auto --epochs 2 --fused_optimizer auto");
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.out, Catch::Contains("on (one kernel per device for all tensors)"));
  auto config = nlohmann::json::parse(test::read_file(run + "/config.json"));
  CHECK(config["resolved"]["fused_optimizer"] == "on");
  CHECK_THAT(config["reasons"]["fused_optimizer"].get<std::string>(), Catch::Contains("fused kernel on cpu"));
  auto third = test::run_gputrain("train --output_dir " + run + " --resume auto --epochs 3 --fused_optimizer off");
  CHECK(third.exit_code == 0);
}

TEST_CASE("cuda: 20 fp16 steps with the fused optimizer, clipping and EMA never wait for the device", "[cuda]") {
  for (double clip : {0.0, 1.0}) {
    INFO("clip " << clip);
    torch::manual_seed(5);
    const torch::Device gpu(torch::kCUDA, 0);
    auto model = make_model("mlp", ModelSpec{{1, 8, 8}, 10, 64});
    model->to(gpu);
    Recipe& ctx = test::keep({});
    ctx.device = gpu;
    ctx.cuda = ctx.precision.amp = ctx.precision.scaler = ctx.fused_optimizer = true;
    ctx.precision.dtype = torch::kHalf;
    Trainer t(model, make_optimizer(optimizer_spec(optimizer_config("adamw"), true), *model), ctx,
              TrainerOptions{clip, LossSpec{"cross_entropy"}, 0.99});
    const Batch b{torch::randn({32, 1, 8, 8}, gpu), torch::randint(0, 10, {32}, torch::TensorOptions(gpu).dtype(torch::kLong))};
    for (int i = 0; i < 3; ++i) t.step({b});  // warm-up: allocations, the first step's state
    torch::Tensor loss;
    cuda_set_sync_debug_error(true);
    try {
      for (int i = 0; i < 20; ++i) loss = t.step({b}).loss;
    } catch (...) {
      cuda_set_sync_debug_error(false);
      throw;
    }
    cuda_set_sync_debug_error(false);
    CHECK(std::isfinite(loss.item<double>()));
  }
}

TEST_CASE("training state memory: the bytes the session reports for the optimizer are what its state holds after a "
          "step, fused or not, frozen parameters left out",
          "[fused]") {
  for (const std::string name : {"adamw", "adam", "sgd"})
    for (bool fused : {false, true}) {
      INFO(name << (fused ? " fused" : " unfused"));
      auto s = make(name, fused);
      s.model->parameters().front().requires_grad_(false);  // frozen: no gradient, no state
      const StateMemory want = expected_state_memory(*s.model, *s.optimizer);
      int64_t params = 0, trainable = 0;
      for (const auto& p : s.model->parameters()) {
        params += static_cast<int64_t>(p.nbytes());
        if (p.requires_grad()) trainable += static_cast<int64_t>(p.nbytes());
      }
      CHECK(want.parameters == params);
      CHECK(want.gradients == trainable);
      CHECK(want.optimizer == (name == "sgd" ? 1 : 2) * trainable);  // momentum 0.9, or two moments
      CHECK(optimizer_state_bytes(*s.optimizer) == 0);  // made at the first update
      set_grads(*s.model, 0);
      s.model->parameters().front().mutable_grad() = torch::Tensor();
      s.optimizer->step();
      CHECK(optimizer_state_bytes(*s.optimizer) == want.optimizer);
    }
}
