// Numerics of the step: accumulation, clipping after unscale, channels_last, autocast, schedules.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "config/config.h"
#include "core/memory_format.h"
#include "core/autocast.h"
#include "step/lr_schedule.h"
#include "step/optimizer.h"
#include "step/trainer.h"
#include "test_trainer.h"

using namespace gputrain;

namespace {

Recipe cpu_context(bool grad_scaler = false) {
  Recipe ctx;
  ctx.device = torch::kCPU;
  ctx.precision.scaler = grad_scaler;
  return ctx;
}

std::unique_ptr<Trainer> make_trainer(const Recipe& ctx, TrainerOptions opts, const std::string& optimizer = "sgd",
                                      bool fused = false) {
  torch::manual_seed(3);
  auto model = make_model("mlp", ModelSpec{{1, 6, 6}, 5, 16});
  Config c;
  c.optimizer = optimizer;
  c.lr = 0.05;
  c.weight_decay = 0.01;
  return std::make_unique<Trainer>(model, make_optimizer(optimizer_spec(c, fused), *model), test::keep(ctx), opts);
}

torch::Tensor flat_params(Trainer& t) {
  std::vector<torch::Tensor> v;
  for (auto& p : t.model().parameters()) v.push_back(p.detach().flatten());
  return torch::cat(v);
}

Batch batch_of(int64_t n, int64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({n, 1, 6, 6}), torch::randint(0, 5, {n})};
}

std::vector<Batch> split(const Batch& b, int64_t k) {
  std::vector<Batch> out;
  auto xs = b.x().chunk(k), ys = b.y().chunk(k);
  for (int64_t i = 0; i < k; ++i) out.push_back({xs[i], ys[i]});
  return out;
}

}  // namespace

TEST_CASE("accumulation: k micro-batches of b equal one batch of k*b", "[numerics]") {
  for (std::string optimizer : {"sgd", "adamw"}) {
    auto big = make_trainer(cpu_context(), {}, optimizer);
    auto acc = make_trainer(cpu_context(), {}, optimizer);  // the same step over 4 micro-batches
    for (int s = 0; s < 3; ++s) {
      Batch b = batch_of(32, 100 + s);
      auto l1 = big->step({b}).loss;
      auto l4 = acc->step(split(b, 4)).loss;
      CHECK(l1.item<double>() == Approx(l4.item<double>()).epsilon(1e-6));
    }
    CHECK(torch::allclose(flat_params(*big), flat_params(*acc), 1e-5, 1e-6));
  }
}

TEST_CASE("clipping after unscale equals clipping the fp32 gradients", "[numerics]") {
  auto plain = make_trainer(cpu_context(false), {.clip_max_norm = 0.05});
  auto scaled = make_trainer(cpu_context(true), {.clip_max_norm = 0.05});
  for (int s = 0; s < 3; ++s) {
    Batch b = batch_of(16, 200 + s);
    auto a = plain->step({b});
    auto c = scaled->step({b});
    REQUIRE(a.grad_norm.defined());
    CHECK(a.grad_norm.item<double>() > 0.05);  // clipping really happened
    CHECK(a.grad_norm.item<double>() == Approx(c.grad_norm.item<double>()).epsilon(1e-5));
  }
  CHECK(torch::allclose(flat_params(*plain), flat_params(*scaled), 1e-5, 1e-6));
}

TEST_CASE("clipping folded into a fused update equals clipping, then the unfused update", "[numerics]") {
  for (const std::string optimizer : {"adamw", "adam", "sgd"})
    for (bool scaler : {false, true}) {
      INFO(optimizer << (scaler ? " with the grad scaler" : ""));
      auto plain = make_trainer(cpu_context(false), {.clip_max_norm = 0.05}, optimizer);
      auto fused = make_trainer(cpu_context(scaler), {.clip_max_norm = 0.05}, optimizer, /*fused=*/true);
      for (int s = 0; s < 8; ++s) {
        Batch b = batch_of(16, 300 + s);
        auto a = plain->step({b});
        auto c = fused->step({b});
        CHECK(a.grad_norm.item<double>() > 0.05);  // clipping really happened
        CHECK(a.grad_norm.item<double>() == Approx(c.grad_norm.item<double>()).epsilon(1e-5));
      }
      CHECK(torch::allclose(flat_params(*plain), flat_params(*fused), 1e-5, 1e-6));
    }
}

TEST_CASE("clip_grad_norm matches torch's clip_grad_norm_", "[numerics]") {
  torch::manual_seed(1);
  auto a = torch::randn({10, 10}, torch::requires_grad()), b = torch::randn({10, 10}, torch::requires_grad());
  (a * b).sum().backward();
  auto a2 = a.detach().clone().requires_grad_(), b2 = b.detach().clone().requires_grad_();
  a2.mutable_grad() = a.grad().clone();
  b2.mutable_grad() = b.grad().clone();
  double ours = clip_grad_norm({a, b}, 1.0).item<double>();
  double theirs = torch::nn::utils::clip_grad_norm_(std::vector<torch::Tensor>{a2, b2}, 1.0);
  CHECK(ours == Approx(theirs).epsilon(1e-5));
  CHECK(torch::allclose(a.grad(), a2.grad(), 1e-5, 1e-6));
  CHECK(torch::allclose(b.grad(), b2.grad(), 1e-5, 1e-6));
}

TEST_CASE("channels_last gives the same outputs as NCHW", "[numerics]") {
  // 1 channel too: there plain NCHW strides pass for channels_last, and the kernels ran NCHW.
  for (int64_t channels : {3, 1}) {
    for (std::string name : {"cnn", "resnet18"}) {
      INFO(name << " on " << channels << " channels");
      torch::manual_seed(5);
      auto nchw = make_model(name, ModelSpec{{channels, 16, 16}, 7, 8});
      torch::manual_seed(5);
      auto nhwc = make_model(name, ModelSpec{{channels, 16, 16}, 7, 8});
      to_channels_last(*nhwc);
      for (const auto& p : nhwc->parameters())
        if (p.dim() == 4) CHECK(p.suggest_memory_format() == torch::MemoryFormat::ChannelsLast);
      nchw->eval();
      nhwc->eval();
      torch::NoGradGuard ng;
      auto x = torch::randn({4, channels, 16, 16});
      auto xl = to_channels_last(x);
      CHECK(xl.suggest_memory_format() == torch::MemoryFormat::ChannelsLast);
      CHECK(torch::equal(xl, x));
      auto a = nchw->forward(x);
      auto b = nhwc->forward(xl);
      CHECK(torch::allclose(a, b, 1e-4, 1e-5));
    }
  }
}

TEST_CASE("autocast guard: bf16 inside on CPU, restored after, backward works", "[numerics]") {
  auto w = torch::randn({8, 8}, torch::requires_grad());
  auto x = torch::randn({4, 8});
  torch::Tensor y;
  {
    AutocastGuard g(true, torch::kCPU, torch::kBFloat16);
    y = torch::mm(x, w);
    CHECK(y.scalar_type() == torch::kBFloat16);
  }
  CHECK(torch::mm(x, w).scalar_type() == torch::kFloat);
  CHECK_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
  y.to(torch::kFloat).sum().backward();
  CHECK(w.grad().scalar_type() == torch::kFloat);
}

TEST_CASE("learning-rate schedules", "[numerics]") {
  LrSchedule s{.kind = "cosine", .base_lr = 1.0, .min_lr = 0.1, .warmup_steps = 10, .total_steps = 110};
  CHECK(s.at(0) == Approx(0.1));  // warm-up: (0 + 1) / 10
  CHECK(s.at(9) == Approx(1.0));
  CHECK(s.at(10) == Approx(1.0));   // cosine starts at the peak
  CHECK(s.at(60) == Approx(0.55));  // halfway: (1 + 0.1) / 2
  CHECK(s.at(110) == Approx(0.1));

  LrSchedule st{.kind = "step", .base_lr = 1.0, .steps_per_epoch = 5, .step_size_epochs = 2, .gamma = 0.5};
  CHECK(st.at(9) == Approx(1.0));
  CHECK(st.at(10) == Approx(0.5));
  CHECK(st.at(20) == Approx(0.25));

  LrSchedule oc{.kind = "onecycle", .base_lr = 1.0, .total_steps = 100};
  CHECK(oc.at(0) == Approx(1.0 / 25));
  CHECK(oc.at(30) == Approx(1.0));
  CHECK(oc.at(100) == Approx(1e-4));

  LrSchedule c{.kind = "constant", .base_lr = 0.3};
  CHECK(c.at(1000) == Approx(0.3));
}

TEST_CASE("weight decay skips biases and norm parameters", "[numerics]") {
  auto model = make_model("cnn", ModelSpec{{1, 8, 8}, 3, 4});
  Config c;
  c.weight_decay = 0.05;
  auto opt = make_optimizer(optimizer_spec(c), *model);
  REQUIRE(opt->param_groups().size() == 2);
  auto wd = [](torch::optim::OptimizerParamGroup& g) {
    return static_cast<torch::optim::AdamWOptions&>(g.options()).weight_decay();
  };
  CHECK(wd(opt->param_groups()[0]) == 0.05);
  CHECK(wd(opt->param_groups()[1]) == 0.0);
  for (auto& p : opt->param_groups()[1].params()) CHECK(p.dim() == 1);
}

TEST_CASE("ema: update is a lerp toward the weights, swap exchanges without copying", "[numerics]") {
  torch::nn::Linear lin(2, 1);
  {
    torch::NoGradGuard g;
    lin->weight.fill_(1.0);
    lin->bias.fill_(0.0);
  }
  gputrain::Ema ema(*lin, 0.75);
  {
    torch::NoGradGuard g;
    lin->weight.fill_(5.0);
    lin->bias.fill_(4.0);
  }
  ema.update(*lin);  // 0.75 * 1 + 0.25 * 5 = 2; 0.75 * 0 + 0.25 * 4 = 1
  ema.swap(*lin);
  CHECK(lin->weight[0][0].item<float>() == Approx(2.0));
  CHECK(lin->bias[0].item<float>() == Approx(1.0));
  ema.swap(*lin);
  CHECK(lin->weight[0][0].item<float>() == Approx(5.0));
  // The device-side gate: a step the scaler skipped leaves the average; a taken one is the lerp.
  ema.update(*lin, torch::ones({1}));
  ema.swap(*lin);
  CHECK(lin->weight[0][0].item<float>() == Approx(2.0));
  ema.swap(*lin);
  ema.update(*lin, torch::zeros({1}));  // 0.75 * 2 + 0.25 * 5 = 2.75
  ema.swap(*lin);
  CHECK(lin->weight[0][0].item<float>() == Approx(2.75));
}
