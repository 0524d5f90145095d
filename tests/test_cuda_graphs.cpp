// --cuda_graphs: the fused optimizer's device learning rate (runs here), the resolver's one-line
// reasons, and on a GPU a replayed step that equals the eager one.
#include <catch2/catch.hpp>

#include <limits>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "config/config.h"
#include "step/fused_optim.h"
#include "step/optimizer.h"
#include "step/trainer.h"
#include "test_util.h"
#include "test_trainer.h"

using namespace gputrain;

namespace {

Config adamw_config() {
  Config c;
  c.optimizer = "adamw";
  c.lr = 0.01;
  c.weight_decay = 0.01;
  return c;
}

torch::Tensor flat(torch::nn::Module& m) {
  std::vector<torch::Tensor> v;
  for (auto& p : m.parameters()) v.push_back(p.detach().flatten().cpu());
  return torch::cat(v);
}

}  // namespace

TEST_CASE("cuda graphs: a device learning rate follows the schedule like a number does", "[fused]") {
  for (const std::string name : {"adamw", "adam", "sgd"}) {
    INFO(name);
    Config c = adamw_config();
    c.optimizer = name;
    c.momentum = 0.9;
    torch::manual_seed(2);
    auto a = make_model("mlp", ModelSpec{{1, 4, 4}, 3, 8});
    torch::manual_seed(2);
    auto b = make_model("mlp", ModelSpec{{1, 4, 4}, 3, 8});
    auto oa = make_optimizer(optimizer_spec(c, true), *a), ob = make_optimizer(optimizer_spec(c, true), *b);
    ob->use_device_lr();
    for (int k = 0; k < 6; ++k) {
      const double lr = 0.01 * (k + 1);  // a schedule that changes every step
      oa->set_lr(lr);
      ob->set_lr(lr);
      ob->refresh_lr();
      torch::manual_seed(50 + k);
      for (auto& p : a->parameters()) p.mutable_grad() = torch::randn_like(p);
      torch::manual_seed(50 + k);
      for (auto& p : b->parameters()) p.mutable_grad() = torch::randn_like(p);
      oa->step();
      ob->step();
    }
    CHECK(torch::allclose(flat(*a), flat(*b), 1e-6, 1e-7));
  }
}

TEST_CASE("cuda graphs: --cuda_graphs on a CPU says why in one line and trains", "[cli]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  auto r = test::run_gputrain("train --preset smoke --cuda_graphs --output_dir " + run);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto config = nlohmann::json::parse(test::read_file(run + "/config.json"));
  CHECK(config["resolved"]["cuda_graphs"] == false);
  CHECK(config["reasons"]["cuda_graphs"] == "n/a on cpu");
  CHECK_THAT(r.out, Catch::Contains("n/a on cpu"));
}

TEST_CASE("cuda: a replayed CUDA-graph step equals the eager step, fallbacks included", "[cuda]") {
  const torch::Device gpu(torch::kCUDA, 0);
  at::globalContext().setDeterministicCuDNN(true);  // the same backward kernels on both sides
  for (bool fp16 : {false, true}) {
    INFO((fp16 ? "fp16 autocast + grad scaler" : "fp32"));
    Recipe ctx;
    ctx.device = gpu;
    ctx.cuda = ctx.fused_optimizer = true;
    ctx.precision.amp = ctx.precision.scaler = fp16;
    ctx.precision.dtype = fp16 ? torch::kHalf : torch::kFloat;
    auto make = [&](bool graphs) {
      torch::manual_seed(9);
      auto model = make_model("cnn", ModelSpec{{1, 12, 12}, 10, 8});
      model->to(gpu);
      Recipe& r = test::keep(ctx);
      r.cuda_graphs = graphs;
      return std::make_unique<Trainer>(model, make_optimizer(optimizer_spec(adamw_config(), true), *model), r,
                                       TrainerOptions{1.0, LossSpec{"cross_entropy"}, 0.9});
    };
    auto eager = make(false), graphed = make(true);
    int replays = 0;
    for (int k = 0; k < 12; ++k) {
      torch::manual_seed(70 + k);
      const int64_t n = k == 8 ? 5 : 16;  // step 9: a partial batch, which must run eagerly
      Batch b{torch::randn({n, 1, 12, 12}, gpu), torch::randint(0, 10, {n}, torch::TensorOptions(gpu).dtype(torch::kLong))};
      // fp16, step 6 (replayed): an overflow, which the scaler must skip and back off from on
      // the device inside the graph as it does eagerly.
      if (fp16 && k == 5) b.x()[0][0][0][0] = std::numeric_limits<float>::infinity();
      for (auto* t : {eager.get(), graphed.get()}) t->set_lr(0.01 / (k + 1));  // a schedule
      auto a = eager->step({b});
      auto g = graphed->step({b});
      replays += graphed->replayed();
      CHECK(graphed->replayed() == (k >= 3 && k != 8));  // 3 eager warm-ups, then replays
      if (fp16 && k == 5) {
        CHECK(a.skipped.item<double>() == 1);
        CHECK(g.skipped.item<double>() == 1);
      } else {
        CHECK(a.loss.item<double>() == Approx(g.loss.item<double>()).epsilon(1e-4));
        CHECK(a.grad_norm.item<double>() == Approx(g.grad_norm.item<double>()).epsilon(1e-4));
      }
      CHECK(eager->scaler().get_scale() == graphed->scaler().get_scale());
    }
    CHECK(replays == 8);
    CHECK(torch::allclose(flat(eager->model()), flat(graphed->model()), 1e-4, 1e-5));
    auto ema = [](Trainer& t) {
      std::vector<torch::Tensor> v;
      for (const auto& e : t.ema()->tensors()) v.push_back(e.flatten().cpu().to(torch::kFloat));
      return torch::cat(v);
    };
    // fp16: the infinite input of step 6 left NaN in the BatchNorm running statistics on both
    // sides (PyTorch's too: a skipped update does not undo the forward's), hence equal_nan.
    CHECK(torch::allclose(ema(*eager), ema(*graphed), 1e-4, 1e-5, /*equal_nan=*/true));
  }
}
