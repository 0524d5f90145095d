// Gradient checkpointing: the same gradients, outputs, BatchNorm statistics and RNG stream as a
// plain run; the recompute really happens; the benchmark variant; end-to-end training runs.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "bench/variants.h"
#include "models/checkpoint_block.h"
#include "models/registry.h"
#include "test_machines.h"
#include "test_util.h"
#include "core/autocast.h"

using namespace gputrain;

namespace {

struct Outcome {
  torch::Tensor out, input_grad, rng_after;
  std::vector<torch::Tensor> grads, buffers;
};

// Two training-mode forward/backward passes (so BatchNorm counts and running statistics move
// twice and gradients accumulate), from fixed seeds.
Outcome run(const std::string& name, ModelSpec spec, std::vector<int64_t> batch_shape, bool checkpointing, bool bf16) {
  spec.grad_checkpointing = checkpointing;
  torch::manual_seed(1);
  auto net = make_model(name, spec);
  net->train();
  torch::manual_seed(2);
  auto x = torch::randn(batch_shape).requires_grad_(true);
  auto w = torch::randn({batch_shape[0], spec.num_classes});
  Outcome o;
  for (int step = 0; step < 2; ++step) {
    torch::Tensor y;
    {
      AutocastGuard autocast(bf16, at::kCPU, at::kBFloat16);  // forward only, as the Trainer does
      y = net->forward(x);
    }
    (y.to(torch::kFloat) * w).sum().backward();
    o.out = y.detach();
  }
  o.input_grad = x.grad();
  o.rng_after = torch::rand({8});  // the stream continues as without recomputation
  for (const auto& p : net->parameters()) o.grads.push_back(p.grad());
  for (const auto& b : net->buffers()) o.buffers.push_back(b.clone());
  return o;
}

void check_same(const std::string& name, const ModelSpec& spec, const std::vector<int64_t>& batch_shape,
                bool bf16 = false) {
  INFO(name << (bf16 ? " under bf16 autocast" : ""));
  auto plain = run(name, spec, batch_shape, false, bf16);
  auto ckpt = run(name, spec, batch_shape, true, bf16);
  CHECK(plain.out.dtype() == ckpt.out.dtype());
  CHECK(torch::allclose(plain.out, ckpt.out, 1e-5, 1e-6));
  CHECK(torch::allclose(plain.input_grad, ckpt.input_grad, 1e-4, 1e-6));
  CHECK(torch::equal(plain.rng_after, ckpt.rng_after));
  REQUIRE(plain.grads.size() == ckpt.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(ckpt.grads[i].defined());
    CHECK(torch::allclose(plain.grads[i], ckpt.grads[i], 1e-4, 1e-6));
  }
  REQUIRE(plain.buffers.size() == ckpt.buffers.size());
  for (size_t i = 0; i < plain.buffers.size(); ++i) {
    INFO("buffer " << i);
    CHECK(torch::equal(plain.buffers[i], ckpt.buffers[i]));  // updated once per forward, not twice
  }
}

ModelSpec spec_of(std::vector<int64_t> shape, int64_t classes, int64_t width, double dropout = 0) {
  ModelSpec s;
  s.input_shape = std::move(shape);
  s.num_classes = classes;
  s.width = width;
  s.dropout = dropout;
  s.heads = 2;
  return s;
}

}  // namespace

TEST_CASE("grad checkpointing: resnets give the same gradients and BatchNorm statistics", "[models]") {
  check_same("resnet18", spec_of({3, 16, 16}, 5, 4), {4, 3, 16, 16});
  check_same("resnet50", spec_of({3, 16, 16}, 5, 2), {3, 3, 16, 16});
}

TEST_CASE("grad checkpointing: transformers with dropout replay the same masks", "[models]") {
  check_same("transformer", spec_of({6, 3}, 4, 8, 0.2), {5, 6, 3});  // sequence
  check_same("transformer", spec_of({7}, 1, 8, 0.2), {5, 7});        // table row
}

TEST_CASE("grad checkpointing: the recompute runs under the forward's autocast state", "[models]") {
  // Backward runs outside autocast; a recompute in fp32 would give other values (and dtypes).
  check_same("resnet18", spec_of({3, 16, 16}, 5, 4), {4, 3, 16, 16}, true);
  check_same("transformer", spec_of({6, 3}, 4, 8, 0.2), {5, 6, 3}, true);
}

TEST_CASE("grad checkpointing: the block runs again in backward, and only then", "[models]") {
  auto lin = torch::nn::Linear(3, 3);
  int calls = 0;
  auto fn = [&](const torch::Tensor& t) {
    ++calls;
    return torch::tanh(lin(t));
  };
  auto x = torch::randn({2, 3}).requires_grad_(true);
  auto y = checkpoint_block(lin.ptr(), fn, x);
  CHECK(calls == 1);
  REQUIRE(y.grad_fn());
  CHECK_THAT(y.grad_fn()->name(), Catch::Contains("CheckpointFn"));
  y.sum().backward();
  CHECK(calls == 2);
  auto x2 = x.detach().requires_grad_(true);
  fn(x2).sum().backward();  // the plain graph: its grads add to the checkpointed ones
  CHECK(torch::allclose(x.grad(), x2.grad()));
  // Under NoGradGuard (evaluation) models call the block directly.
  torch::NoGradGuard no_grad;
  CHECK_FALSE(checkpointing_active(*lin));
}

TEST_CASE("bench: the grad_checkpointing variant runs for resnets and transformers only", "[models][bench]") {
  Config w;
  w.model = "resnet18";
  auto vs = expand_variants(w, {"grad_checkpointing"}, test::cpu_machine());
  REQUIRE(vs.size() == 2);
  CHECK(vs[1].name == "grad_checkpointing");
  CHECK(vs[1].skipped.empty());
  CHECK(vs[1].config.grad_checkpointing);
  CHECK_FALSE(vs[0].config.grad_checkpointing);
  w.grad_checkpointing = true;  // the baseline and "all" run without it: it is a memory trade
  auto all = expand_variants(w, {}, test::cpu_machine());
  CHECK_FALSE(all.front().config.grad_checkpointing);
  CHECK_FALSE(all.back().config.grad_checkpointing);
  w.model = "lstm";
  CHECK(expand_variants(w, {"grad_checkpointing"}, test::cpu_machine())[1].skipped ==
        "n/a for lstm (no residual blocks or encoder layers)");
}

TEST_CASE("cli: the new models train end to end on synthetic data", "[models][cli]") {
  for (std::string flags : {
           "--model resnet18 --width 4 --grad_checkpointing",
           "--model resnet50 --width 2 --stem imagenet",
           "--model lstm --input_shape 12x5 --width 16",
           "--model gru --input_shape 9 --depth 1",
           "--model transformer --input_shape 12x5 --width 16 --heads 2 --grad_checkpointing --dropout 0.1",
           "--model transformer --input_shape 9 --width 16",
           "--model cnn3d --input_shape 2x16x8x8 --width 4",
       }) {
    test::TempDir dir;
    // fp32: on a CPU with native bf16, auto AMP turns bf16 autocast on, and resnet50's ImageNet
    // stem on 16x16 images gives layer4's stride-2 conv a 1x1 map, where the pinned torch's
    // oneDNN bf16 weight gradient reads uninitialized memory (docs/ARCHITECTURE.md, "Facts").
    auto r = test::run_gputrain("train --preset smoke --epochs 1 --max_steps 4 --no-save_checkpoints --no-use_amp " +
                                flags + " --output_dir " + (dir / "run"));
    INFO(flags << "\n" << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("done:"));
  }
  auto bad = test::run_gputrain("train --preset smoke --model lstm");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("gputrain: error: model 'lstm' needs samples of shape T x F or F") &&
                          Catch::Contains("hint: use --model cnn, resnet18"));
}
