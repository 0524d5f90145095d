// GradScaler: an injected inf skips exactly that step and halves the scale; growth after the
// interval; the final weights equal a control run that skipped the same step.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "models/registry.h"
#include "step/grad_scaler.h"
#include "step/optimizer.h"

using namespace gputrain;

namespace {

struct Data {
  std::vector<torch::Tensor> x, y;
};
Data make_data(int steps) {
  torch::manual_seed(123);
  Data d;
  for (int i = 0; i < steps; ++i) {
    d.x.push_back(torch::randn({16, 1, 4, 4}));
    d.y.push_back(torch::randint(0, 3, {16}));
  }
  return d;
}

NetPtr fresh_model() {
  torch::manual_seed(7);
  return make_model("mlp", ModelSpec{{1, 4, 4}, 3, 8});
}

// Trains `steps` steps; with a scaler, poisons one gradient at `inject`; without one, simply
// leaves step `inject` out. Returns the flattened final parameters.
torch::Tensor train(bool with_scaler, int steps, int inject, std::vector<double>* scales = nullptr) {
  Data d = make_data(steps);
  NetPtr model = fresh_model();
  Optimizer opt(std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)),
                nullptr, OptimizerKind::kSGD, {});
  GradScaler scaler(with_scaler, torch::kCPU, {.init_scale = 1024, .growth_interval = 1000});
  for (int s = 0; s < steps; ++s) {
    if (!with_scaler && s == inject) continue;
    auto loss = torch::nn::functional::cross_entropy(model->forward(d.x[s]), d.y[s]);
    scaler.scale(loss).backward();
    if (with_scaler && s == inject) {
      auto g = model->parameters()[0].grad();
      g.view(-1)[3] = std::numeric_limits<float>::infinity();
    }
    scaler.unscale_(opt);
    auto skipped = scaler.step(opt);
    bool stepped = !skipped.defined() || skipped.item<float>() == 0;
    CHECK(stepped == !(with_scaler && s == inject));
    scaler.update();
    opt.zero_grad();
    if (scales) scales->push_back(scaler.get_scale());
  }
  std::vector<torch::Tensor> flat;
  for (auto& p : model->parameters()) flat.push_back(p.detach().flatten());
  return torch::cat(flat);
}

}  // namespace

TEST_CASE("grad scaler: an inf gradient skips that step and halves the scale", "[scaler]") {
  std::vector<double> scales;
  auto scaled = train(true, 8, 4, &scales);
  REQUIRE(scales.size() == 8);
  for (int s = 0; s < 4; ++s) CHECK(scales[s] == 1024.0);
  CHECK(scales[4] == 512.0);
  CHECK(scales[7] == 512.0);
  auto control = train(false, 8, 4);
  CHECK(torch::allclose(scaled, control, 1e-5, 1e-6));
  // And the skipped step mattered: a run that took it differs.
  CHECK_FALSE(torch::allclose(train(false, 8, -1), control, 1e-5, 1e-6));
}

TEST_CASE("grad scaler: the scale grows after growth_interval clean steps", "[scaler]") {
  NetPtr model = fresh_model();
  Optimizer opt(std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.01)), nullptr,
                OptimizerKind::kSGD, {});
  GradScaler scaler(true, torch::kCPU, {.init_scale = 256, .growth_factor = 2, .growth_interval = 3});
  Data d = make_data(6);
  std::vector<double> scales;
  for (int s = 0; s < 6; ++s) {
    scaler.scale(torch::nn::functional::cross_entropy(model->forward(d.x[s]), d.y[s])).backward();
    CHECK(scaler.step(opt).item<float>() == 0);  // not skipped
    scaler.update();
    opt.zero_grad();
    scales.push_back(scaler.get_scale());
  }
  CHECK(scales == std::vector<double>{256, 256, 512, 512, 512, 1024});
}

TEST_CASE("grad scaler: scaled-then-unscaled gradients equal the fp32 gradients", "[scaler]") {
  Data d = make_data(1);
  NetPtr a = fresh_model(), b = fresh_model();
  Optimizer oa(std::make_unique<torch::optim::SGD>(a->parameters(), torch::optim::SGDOptions(0.1)), nullptr,
               OptimizerKind::kSGD, {});
  GradScaler scaler(true, torch::kCPU, {.init_scale = 4096});
  scaler.scale(torch::nn::functional::cross_entropy(a->forward(d.x[0]), d.y[0])).backward();
  scaler.unscale_(oa);
  torch::nn::functional::cross_entropy(b->forward(d.x[0]), d.y[0]).backward();
  for (size_t i = 0; i < a->parameters().size(); ++i)
    CHECK(torch::allclose(a->parameters()[i].grad(), b->parameters()[i].grad(), 1e-5, 1e-7));
}

TEST_CASE("grad scaler: disabled, it is a pass-through", "[scaler]") {
  GradScaler scaler(false, torch::kCPU);
  auto loss = torch::tensor(2.5);
  CHECK(scaler.scale(loss).item<double>() == 2.5);
  CHECK(scaler.get_scale() == 1.0);
}
