// Models: forward/backward shapes, parameter counts (torchvision's for the resnets), torchvision
// layer names, input-rank errors, and `gputrain models` end to end.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include <torch/torch.h>

#include "config/config.h"
#include "config/validate.h"
#include "core/error.h"
#include "core/peak_flops.h"
#include "core/text.h"
#include "data/schema.h"
#include "models/registry.h"
#include "test_errors.h"
#include "test_util.h"

using namespace gputrain;

namespace {

ModelSpec spec_of(std::vector<int64_t> shape, int64_t classes, int64_t width, int64_t depth = 0) {
  ModelSpec s;
  s.input_shape = std::move(shape);
  s.num_classes = classes;
  s.width = width;
  s.depth = depth;
  return s;
}

// One forward and backward on a batch of `n`; every parameter must get a gradient.
void check_forward_backward(const std::string& name, const ModelSpec& s, int64_t n = 3) {
  INFO(name);
  torch::manual_seed(0);
  auto net = make_model(name, s);
  net->train();
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), s.input_shape.begin(), s.input_shape.end());
  auto y = net->forward(torch::randn(shape));
  REQUIRE(y.sizes() == torch::IntArrayRef({n, s.num_classes}));
  y.square().mean().backward();
  for (const auto& p : net->named_parameters()) {
    INFO(p.key());
    REQUIRE(p.value().grad().defined());
    CHECK(p.value().grad().sizes() == p.value().sizes());
  }
  net->eval();
  torch::NoGradGuard no_grad;
  CHECK(net->forward(torch::randn(shape)).sizes() == torch::IntArrayRef({n, s.num_classes}));
}

std::vector<std::string> state_names(const torch::nn::Module& m) {
  std::vector<std::string> names;
  for (const auto& p : m.named_parameters()) names.push_back(p.key());
  for (const auto& b : m.named_buffers()) names.push_back(b.key());
  std::sort(names.begin(), names.end());
  return names;
}

int64_t count(const std::string& name, const ModelSpec& s) { return parameter_count(*make_model(name, s)); }

// Token data as --dataset tokens gives it: input_ids and labels of `t` tokens, a vocabulary of `vocab`.
ModelSpec token_spec(int64_t t, int64_t vocab, int64_t width, int64_t depth = 2) {
  ModelSpec s = spec_of({}, vocab, width, depth);
  auto schema = std::make_shared<SampleSchema>();
  schema->fields = {{"input_ids", DType::kI64, {t}}, {"labels", DType::kI64, {t}}};
  schema->target = "labels";
  s.fields = schema;
  return s;
}

}  // namespace

TEST_CASE("models: every model runs forward and backward on tiny inputs", "[models]") {
  check_forward_backward("mlp", spec_of({2, 5}, 3, 8));
  check_forward_backward("cnn", spec_of({3, 8, 8}, 4, 4));
  for (const char* r : {"resnet18", "resnet34", "resnet50"}) {
    check_forward_backward(r, spec_of({3, 16, 16}, 5, 4));  // small stem
    auto s = spec_of({1, 72, 72}, 2, 4);                    // auto: ImageNet stem above 64 pixels
    check_forward_backward(r, s, 2);
  }
  for (const char* r : {"lstm", "gru", "transformer"}) {
    check_forward_backward(r, spec_of({6, 3}, 4, 8));  // sequence: T=6 steps of F=3
    check_forward_backward(r, spec_of({7}, 1, 8, 1));  // table row: one value out (regression)
  }
  check_forward_backward("cnn3d", spec_of({2, 9, 5, 5}, 3, 4));
}

TEST_CASE("models: cnn3d takes a 2x256x21x21 volume at batch 8 on CPU", "[models]") {
  check_forward_backward("cnn3d", spec_of({2, 256, 21, 21}, 3, 4), 8);
}

TEST_CASE("models: resnet parameter counts equal torchvision's", "[models]") {
  auto imagenet = spec_of({3, 224, 224}, 1000, 0);  // auto picks the ImageNet stem at 224
  CHECK(count("resnet18", imagenet) == 11689512);
  CHECK(count("resnet34", imagenet) == 21797672);
  CHECK(count("resnet50", imagenet) == 25557032);
  imagenet.stem = "imagenet";
  auto tiny = imagenet;
  tiny.input_shape = {3, 32, 32};  // the stem flag wins over the size
  CHECK(count("resnet50", tiny) == 25557032);
  // The small stem's 3x3 conv1 has 64*3*(49-9) fewer weights; the CIFAR count is the known one.
  auto small = spec_of({3, 224, 224}, 1000, 0);
  small.stem = "small";
  CHECK(count("resnet18", small) == 11689512 - 64 * 3 * 40);
  CHECK(count("resnet18", spec_of({3, 32, 32}, 10, 0)) == 11173962);
}

TEST_CASE("models: resnet18 has torchvision's state_dict names and shapes", "[models]") {
  // torchvision.models.resnet18().state_dict().keys(): 62 parameters + 60 BatchNorm buffers.
  std::vector<std::string> expected = {"conv1.weight",
                                       "bn1.weight",
                                       "bn1.bias",
                                       "bn1.running_mean",
                                       "bn1.running_var",
                                       "bn1.num_batches_tracked",
                                       "layer1.0.conv1.weight",
                                       "layer1.0.bn1.weight",
                                       "layer1.0.bn1.bias",
                                       "layer1.0.bn1.running_mean",
                                       "layer1.0.bn1.running_var",
                                       "layer1.0.bn1.num_batches_tracked",
                                       "layer1.0.conv2.weight",
                                       "layer1.0.bn2.weight",
                                       "layer1.0.bn2.bias",
                                       "layer1.0.bn2.running_mean",
                                       "layer1.0.bn2.running_var",
                                       "layer1.0.bn2.num_batches_tracked",
                                       "layer1.1.conv1.weight",
                                       "layer1.1.bn1.weight",
                                       "layer1.1.bn1.bias",
                                       "layer1.1.bn1.running_mean",
                                       "layer1.1.bn1.running_var",
                                       "layer1.1.bn1.num_batches_tracked",
                                       "layer1.1.conv2.weight",
                                       "layer1.1.bn2.weight",
                                       "layer1.1.bn2.bias",
                                       "layer1.1.bn2.running_mean",
                                       "layer1.1.bn2.running_var",
                                       "layer1.1.bn2.num_batches_tracked",
                                       "layer2.0.conv1.weight",
                                       "layer2.0.bn1.weight",
                                       "layer2.0.bn1.bias",
                                       "layer2.0.bn1.running_mean",
                                       "layer2.0.bn1.running_var",
                                       "layer2.0.bn1.num_batches_tracked",
                                       "layer2.0.conv2.weight",
                                       "layer2.0.bn2.weight",
                                       "layer2.0.bn2.bias",
                                       "layer2.0.bn2.running_mean",
                                       "layer2.0.bn2.running_var",
                                       "layer2.0.bn2.num_batches_tracked",
                                       "layer2.0.downsample.0.weight",
                                       "layer2.0.downsample.1.weight",
                                       "layer2.0.downsample.1.bias",
                                       "layer2.0.downsample.1.running_mean",
                                       "layer2.0.downsample.1.running_var",
                                       "layer2.0.downsample.1.num_batches_tracked",
                                       "layer2.1.conv1.weight",
                                       "layer2.1.bn1.weight",
                                       "layer2.1.bn1.bias",
                                       "layer2.1.bn1.running_mean",
                                       "layer2.1.bn1.running_var",
                                       "layer2.1.bn1.num_batches_tracked",
                                       "layer2.1.conv2.weight",
                                       "layer2.1.bn2.weight",
                                       "layer2.1.bn2.bias",
                                       "layer2.1.bn2.running_mean",
                                       "layer2.1.bn2.running_var",
                                       "layer2.1.bn2.num_batches_tracked",
                                       "layer3.0.conv1.weight",
                                       "layer3.0.bn1.weight",
                                       "layer3.0.bn1.bias",
                                       "layer3.0.bn1.running_mean",
                                       "layer3.0.bn1.running_var",
                                       "layer3.0.bn1.num_batches_tracked",
                                       "layer3.0.conv2.weight",
                                       "layer3.0.bn2.weight",
                                       "layer3.0.bn2.bias",
                                       "layer3.0.bn2.running_mean",
                                       "layer3.0.bn2.running_var",
                                       "layer3.0.bn2.num_batches_tracked",
                                       "layer3.0.downsample.0.weight",
                                       "layer3.0.downsample.1.weight",
                                       "layer3.0.downsample.1.bias",
                                       "layer3.0.downsample.1.running_mean",
                                       "layer3.0.downsample.1.running_var",
                                       "layer3.0.downsample.1.num_batches_tracked",
                                       "layer3.1.conv1.weight",
                                       "layer3.1.bn1.weight",
                                       "layer3.1.bn1.bias",
                                       "layer3.1.bn1.running_mean",
                                       "layer3.1.bn1.running_var",
                                       "layer3.1.bn1.num_batches_tracked",
                                       "layer3.1.conv2.weight",
                                       "layer3.1.bn2.weight",
                                       "layer3.1.bn2.bias",
                                       "layer3.1.bn2.running_mean",
                                       "layer3.1.bn2.running_var",
                                       "layer3.1.bn2.num_batches_tracked",
                                       "layer4.0.conv1.weight",
                                       "layer4.0.bn1.weight",
                                       "layer4.0.bn1.bias",
                                       "layer4.0.bn1.running_mean",
                                       "layer4.0.bn1.running_var",
                                       "layer4.0.bn1.num_batches_tracked",
                                       "layer4.0.conv2.weight",
                                       "layer4.0.bn2.weight",
                                       "layer4.0.bn2.bias",
                                       "layer4.0.bn2.running_mean",
                                       "layer4.0.bn2.running_var",
                                       "layer4.0.bn2.num_batches_tracked",
                                       "layer4.0.downsample.0.weight",
                                       "layer4.0.downsample.1.weight",
                                       "layer4.0.downsample.1.bias",
                                       "layer4.0.downsample.1.running_mean",
                                       "layer4.0.downsample.1.running_var",
                                       "layer4.0.downsample.1.num_batches_tracked",
                                       "layer4.1.conv1.weight",
                                       "layer4.1.bn1.weight",
                                       "layer4.1.bn1.bias",
                                       "layer4.1.bn1.running_mean",
                                       "layer4.1.bn1.running_var",
                                       "layer4.1.bn1.num_batches_tracked",
                                       "layer4.1.conv2.weight",
                                       "layer4.1.bn2.weight",
                                       "layer4.1.bn2.bias",
                                       "layer4.1.bn2.running_mean",
                                       "layer4.1.bn2.running_var",
                                       "layer4.1.bn2.num_batches_tracked",
                                       "fc.weight",
                                       "fc.bias"};
  REQUIRE(expected.size() == 122);
  std::sort(expected.begin(), expected.end());
  auto net = make_model("resnet18", spec_of({3, 224, 224}, 1000, 0));
  CHECK(state_names(*net) == expected);
  CHECK(net->named_parameters().size() == 62);
  auto params = net->named_parameters();
  CHECK(params["conv1.weight"].sizes() == torch::IntArrayRef({64, 3, 7, 7}));
  CHECK(params["layer2.0.downsample.0.weight"].sizes() == torch::IntArrayRef({128, 64, 1, 1}));
  CHECK(params["layer4.1.conv2.weight"].sizes() == torch::IntArrayRef({512, 512, 3, 3}));
  CHECK(params["fc.weight"].sizes() == torch::IntArrayRef({1000, 512}));
  // The small stem keeps the names; only conv1's kernel differs.
  auto small = make_model("resnet18", spec_of({3, 32, 32}, 10, 0));
  CHECK(small->named_parameters()["conv1.weight"].sizes() == torch::IntArrayRef({64, 3, 3, 3}));
}

TEST_CASE("models: resnet50 bottlenecks follow torchvision v1.5", "[models]") {
  auto net = make_model("resnet50", spec_of({3, 224, 224}, 1000, 0));
  auto params = net->named_parameters();
  CHECK(params.size() == 161);
  CHECK(net->named_buffers().size() == 159);
  CHECK(params["layer1.0.conv3.weight"].sizes() == torch::IntArrayRef({256, 64, 1, 1}));
  CHECK(params["layer1.0.downsample.0.weight"].sizes() == torch::IntArrayRef({256, 64, 1, 1}));
  CHECK(params["layer4.2.bn3.weight"].sizes() == torch::IntArrayRef({2048}));
  CHECK(params["fc.weight"].sizes() == torch::IntArrayRef({1000, 2048}));
  // The stride sits on conv2 (3x3), not conv1 (1x1).
  auto& block = *net->named_children()["layer2"]->children()[0];
  auto conv1 = block.named_children()["conv1"]->as<torch::nn::Conv2d>();
  auto conv2 = block.named_children()["conv2"]->as<torch::nn::Conv2d>();
  CHECK(conv1->options.stride()->at(0) == 1);
  CHECK(conv2->options.stride()->at(0) == 2);
}

TEST_CASE("models: rnn, transformer and cnn3d parameter counts follow their formulas", "[models]") {
  const int64_t F = 5, H = 16, C = 3, T = 10;
  // torch's RNN layer: weight_ih (gates*H x in), weight_hh (gates*H x H), two biases (gates*H).
  auto rnn = [&](int64_t gates, int64_t layers) {
    int64_t n = 0;
    for (int64_t l = 0; l < layers; ++l) n += gates * H * ((l == 0 ? F : H) + H + 2);
    return n + H * C + C;
  };
  CHECK(count("lstm", spec_of({T, F}, C, H, 3)) == rnn(4, 3));
  CHECK(count("gru", spec_of({T, F}, C, H, 1)) == rnn(3, 1));
  CHECK(count("lstm", spec_of({T, F}, C, 0)) == 4 * 128 * (F + 128 + 2) + 4 * 128 * (128 + 128 + 2) + 128 * C + C);

  const int64_t d = 16, ff = 4 * d;
  const int64_t layer = (3 * d * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d) + 4 * d;
  const int64_t common = d /* cls */ + 2 * d /* norm */ + d * C + C;
  auto seq = spec_of({T, F}, C, d, 3);
  seq.heads = 2;
  CHECK(count("transformer", seq) == (F * d + d) + (T + 1) * d + 3 * layer + common);
  auto tab = spec_of({F}, C, d, 2);
  CHECK(count("transformer", tab) == 2 * F * d + 2 * layer + common);

  // cnn3d: 3x3x3 convs without bias, BatchNorm (2 per channel), widths w, 2w, 4w, ...
  const int64_t w = 4;
  int64_t n = 0, in = 2;
  for (int64_t i = 0; i < 3; ++i) {
    n += 27 * in * (w << i) + 2 * (w << i);
    in = w << i;
  }
  CHECK(count("cnn3d", spec_of({2, 64, 21, 21}, C, w, 3)) == n + in * C + C);
}

TEST_CASE("models: each family states the sample rank it takes, with a hint", "[models]") {
  auto err = [](const std::string& name, std::vector<int64_t> shape) {
    try {
      make_model(name, spec_of(std::move(shape), 3, 8));
    } catch (const Error& e) {
      CHECK(e.exit_code == 2);
      return e.problems.at(0) + " | " + e.hint;
    }
    FAIL("expected a usage error for " << name);
    return std::string();
  };
  // The hint names the families that take the rank, the specialised ones first (in the table's
  // order) and those that take any rank last: "use --model lstm, gru, transformer or mlp".
  auto fits = [](size_t rank) {
    std::vector<std::string> names, any;
    for (const Family* f : families()) {
      if (f->named_inputs) continue;  // no x/y sample suits them
      if (f->ranks.empty()) any.push_back(f->name);
      else if (std::find(f->ranks.begin(), f->ranks.end(), rank) != f->ranks.end()) names.push_back(f->name);
    }
    names.insert(names.end(), any.begin(), any.end());
    std::string list;
    for (size_t i = 0; i < names.size(); ++i) list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    return "use --model " + list;
  };
  auto m = err("resnet18", {64, 8});
  CHECK_THAT(m, Catch::Contains("model 'resnet18' needs samples of shape C x H x W") && Catch::Contains("64x8"));
  CHECK_THAT(m, Catch::Contains(fits(2) + " for samples of shape 64x8"));
  CHECK_THAT(fits(2), Catch::StartsWith("use --model lstm, gru, transformer"));
  CHECK_THAT(err("cnn", {20}), Catch::Contains(fits(1) + " for samples of shape 20"));
  CHECK_THAT(err("lstm", {3, 32, 32}), Catch::Contains("needs samples of shape T x F or F") &&
                                           Catch::Contains(fits(3) + " for samples of shape 3x32x32"));
  CHECK_THAT(err("transformer", {2, 8, 8, 8}), Catch::Contains(fits(4) + " for samples of shape 2x8x8x8"));
  CHECK_THAT(err("cnn3d", {3, 32, 32}), Catch::Contains("needs samples of shape C x D x H x W"));
  CHECK_THAT(err("resnet", {3, 32, 32}), Catch::Contains("unknown model 'resnet'"));
  // mlp takes any rank.
  for (std::vector<int64_t> shape : {std::vector<int64_t>{7}, {3, 4}, {1, 4, 4}, {2, 3, 4, 4}})
    CHECK(count("mlp", spec_of(shape, 3, 8)) > 0);
  auto heads = spec_of({6, 3}, 3, 10);
  heads.heads = 4;
  CHECK_THAT(test::error_of([&] { make_model("transformer", heads); }), Catch::Contains("not a multiple of heads 4"));
}

TEST_CASE("models: the config's model choices are the registry's names", "[models]") {
  Config c;
  c.model = "transformer";
  c.depth = 3;
  c.heads = 2;
  c.stem = "imagenet";
  c.dropout = 0.25;
  c.grad_checkpointing = true;
  auto s = model_spec(c, {5, 4}, 2);
  CHECK(s.depth == 3);
  CHECK(s.heads == 2);
  CHECK(s.stem == "imagenet");
  CHECK(s.dropout == 0.25);
  CHECK(s.grad_checkpointing);
  CHECK(s.num_classes == 2);
  c.stem = "big";
  auto problems = config_problems(c);
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Catch::Contains("stem 'big'"));
}

TEST_CASE("cli: gputrain models lists every model with its parameter count", "[models][cli]") {
  auto r = test::run_gputrain("models --input_shape 3x32x32 --num_classes 10");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("models for samples of shape 3x32x32 with 10 outputs"));
  for (const auto& name : model_names()) CHECK_THAT(r.out, Catch::Contains("  " + name + " "));
  CHECK_THAT(r.out, Catch::Contains("resnet18     C x H x W        11,173,962"));
  CHECK_THAT(r.out, Catch::Contains("lstm         T x F or F       n/a: needs T x F or F"));
  CHECK_THAT(r.out, Catch::Contains("cnn3d        C x D x H x W    n/a: needs C x D x H x W"));

  auto big = test::run_gputrain("models --input_shape 3x224x224 --num_classes 1000");
  REQUIRE(big.exit_code == 0);
  CHECK_THAT(big.out, Catch::Contains("resnet50     C x H x W        25,557,032"));

  auto seq = test::run_gputrain("models --input_shape 64x8 --num_classes 2 --width 16 --heads 3");
  INFO(seq.out << seq.err);
  REQUIRE(seq.exit_code == 0);
  CHECK_THAT(seq.out, Catch::Contains("resnet18     C x H x W        n/a: needs C x H x W"));
  CHECK_THAT(seq.out, Catch::Contains("transformer  T x F or F       n/a: transformer width 16 is not a multiple"));
  // 4*16*(8+16+2) + 4*16*(16+16+2) + 16*2+2
  CHECK_THAT(seq.out, Catch::Contains("lstm         T x F or F       3,874"));

  auto bad = test::run_gputrain("models --input_shape 3x32 --bogus");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("unknown flag '--bogus'"));
}

TEST_CASE("models: a sample shape a model cannot take is exit 2 naming the shape, before any run folder", "[models]") {
  test::TempDir dir;
  for (const std::string& args : {std::string("--model cnn --input_shape 1x3x3"),
                                  std::string("--model transformer --input_shape 5x7 --heads 3")}) {
    auto r = test::run_gputrain("train --dataset synthetic " + args + " --epochs 1 --output_dir " + (dir / "run"));
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("hint: "));
    CHECK_FALSE(std::filesystem::exists(dir / "run"));
  }
  auto small = test::run_gputrain("train --dataset synthetic --model cnn --input_shape 1x3x3 --output_dir " + (dir / "run"));
  CHECK_THAT(small.err, Catch::Contains("model 'cnn' cannot take samples of shape 1x3x3: cnn needs inputs of at least 4x4"));
  CHECK_THAT(small.err, Catch::Contains("--input_shape"));
}

TEST_CASE("models: forward FLOPs are counted from the matrix products and convolutions", "[models]") {
  // mlp 64-256-256-10: three products of 2 x in x out.
  CHECK(make_model("mlp", spec_of({64}, 10, 256, 0))->flops_per_sample == 2.0 * (64 * 256 + 256 * 256 + 256 * 10));
  // cnn width 16 on 1x28x28: conv 1->16 at 28x28, conv 16->32 at 14x14 (3x3 kernels), then
  // 32*7*7 -> 128 -> 10.
  const double cnn = 2.0 * (16 * 28 * 28 * 1 * 9 + 32 * 14 * 14 * 16 * 9 + 32 * 7 * 7 * 128 + 128 * 10);
  CHECK(make_model("cnn", spec_of({1, 28, 28}, 10, 16, 0))->flops_per_sample == cnn);
  // resnet50 at 224x224: about 4.1 GMACs, the figure usually quoted (8.2 GFLOPs).
  CHECK(make_model("resnet50", spec_of({3, 224, 224}, 1000, 0, 0))->flops_per_sample == Approx(8.2e9).epsilon(0.02));
  // Every family counts something, recurrent and attention ones included.
  for (const char* r : {"lstm", "gru", "transformer"}) {
    INFO(r);
    CHECK(make_model(r, spec_of({6, 3}, 4, 8, 0))->flops_per_sample > 0);
  }
  CHECK(make_model("cnn3d", spec_of({2, 9, 5, 5}, 3, 4, 0))->flops_per_sample > 0);
}

TEST_CASE("models: peak rates for MFU come from the GPU table or the CPU's clock and vectors", "[models]") {
  CHECK(gpu_peak_flops("NVIDIA H100 80GB HBM3", "bf16").flops == 989.5e12);
  CHECK(gpu_peak_flops("NVIDIA H100 PCIe", "fp16").flops == 756e12);
  CHECK(gpu_peak_flops("NVIDIA A100-SXM4-40GB", "tf32").flops == 156e12);
  auto t4 = gpu_peak_flops("Tesla T4", "bf16");
  CHECK(t4.flops == 0);
  CHECK_THAT(t4.basis, Catch::Contains("no bf16 tensor cores"));
  CHECK_THAT(gpu_peak_flops("Imaginary GPU 9000", "fp32").basis, Catch::Contains("not in gputrain's table"));
  // This machine: threads x clock x 2 FMA units x lanes x 2, at least 4 lanes at 1 GHz per thread.
  auto cpu = cpu_peak_flops(2, "fp32");
  CHECK(cpu.flops >= 2 * 1e9 * 2 * 4 * 2);
  CHECK_THAT(cpu.basis, Catch::Contains("2 threads x"));
  CHECK(cpu_peak_flops(4, "fp32").flops == Approx(2 * cpu.flops));
}

TEST_CASE("models: every family's spec holds every field, and each matches the model it builds", "[models]") {
  REQUIRE(families().size() == model_names().size());
  for (const Family* f : families()) {
    INFO(f->name);
    CHECK(&family(f->name) == f);
    REQUIRE(f->make != nullptr);
    CHECK_FALSE(f->input.empty());
    CHECK_FALSE(f->layers.empty());
    CHECK_FALSE(f->head.empty());
    CHECK_FALSE(f->twin.empty());
    for (const auto& o : f->options)
      CHECK((o == "depth" || o == "heads" || o == "dropout" || o == "positions" || o == "kv_heads"));
    // One model per sample rank the family takes (an image where it takes any rank).
    std::vector<std::vector<int64_t>> shapes;
    for (size_t rank : f->ranks.empty() ? std::vector<size_t>{3} : f->ranks)
      shapes.push_back(rank == 1 ? std::vector<int64_t>{6} : rank == 2 ? std::vector<int64_t>{5, 3}
                       : rank == 3 ? std::vector<int64_t>{3, 16, 16} : std::vector<int64_t>{2, 4, 8, 8});
    std::set<std::string> used_layers;
    for (const auto& shape : shapes) {
      INFO(shape_text(shape));
      // A family reading named fields gets token data of that many positions.
      auto spec = f->named_inputs ? token_spec(shape.at(0), 3, 8) : spec_of(shape, 3, 8);
      spec.grad_checkpointing = f->blocks;
      if (std::find(f->options.begin(), f->options.end(), "heads") != f->options.end()) spec.heads = 2;
      auto net = make_model(f->name, spec);
      // pieces: whether pipeline stages can split it.
      CHECK(net->pieces().empty() == !f->pieces);
      // layers: a layer-wise rate walks them input to output, so the layer ids never go down along
      // the parameters; the head shares the last; head: names parameters.
      std::vector<std::string> names;
      for (const auto& p : net->named_parameters()) names.push_back(p.key());
      const auto ids = layer_ids(*f, names);
      REQUIRE(ids.size() == names.size());
      const int64_t last = *std::max_element(ids.begin(), ids.end());
      CHECK(last > 0);
      for (size_t i = 0; i < names.size(); ++i) {
        INFO(names[i]);
        if (i > 0) CHECK(ids[i] >= ids[i - 1]);
        if (in_head(*f, names[i])) CHECK(ids[i] == last);
        for (const auto& entry : f->layers)
          for (const auto& l : layer_prefixes(entry))
            if (under_prefix(names[i], l.prefix)) used_layers.insert(l.prefix);
      }
      CHECK(std::any_of(names.begin(), names.end(), [&](const std::string& n) { return in_head(*f, n); }));
    }
    for (const auto& entry : f->layers) {
      INFO(entry);  // no layer that no input form has
      for (const auto& l : layer_prefixes(entry)) CHECK(used_layers.count(l.prefix));
    }
  }
}

TEST_CASE("models: gpt is causal, ties its head to the token embedding and pads its rows to 128", "[models]") {
  torch::manual_seed(0);
  auto spec = token_spec(12, 300, 32);
  spec.heads = 4;
  auto net = make_model("gpt", spec);
  std::map<std::string, torch::Tensor> params;
  for (const auto& p : net->named_parameters()) params[p.key()] = p.value();
  // No lm_head of its own: the token embedding is the only [vocab, width] tensor, 300 -> 384 rows.
  CHECK(params.count("lm_head.weight") == 0);
  CHECK(params.at("transformer.wte.weight").sizes() == torch::IntArrayRef({384, 32}));
  CHECK(params.at("transformer.wpe.weight").sizes() == torch::IntArrayRef({12, 32}));
  CHECK(params.at("transformer.h.1.attn.c_attn.weight").sizes() == torch::IntArrayRef({96, 32}));
  // GPT-2's initialisation: residual projections 0.02 / sqrt(2 x layers).
  CHECK(params.at("transformer.h.0.mlp.c_proj.weight").std().item<double>() == Approx(0.02 / 2).epsilon(0.1));
  CHECK(params.at("transformer.h.0.mlp.c_fc.weight").std().item<double>() == Approx(0.02).epsilon(0.1));
  net->eval();
  torch::NoGradGuard no_grad;
  auto ids = torch::randint(0, 300, {2, 12}, torch::kLong);
  auto logits = net->forward(ids);
  CHECK(logits.sizes() == torch::IntArrayRef({2, 12, 300}));  // the real vocabulary, not the padded rows
  // Causal: changing the last token changes no earlier position's logits.
  auto other = ids.clone();
  other.index_put_({torch::indexing::Slice(), 11}, (ids.index({torch::indexing::Slice(), 11}) + 1) % 300);
  auto changed = net->forward(other);
  CHECK(torch::allclose(changed.narrow(1, 0, 11), logits.narrow(1, 0, 11)));
  CHECK_FALSE(torch::allclose(changed.narrow(1, 11, 1), logits.narrow(1, 11, 1)));
  // The head is wte: a change to its row 5 moves every position's logit 5, and no other.
  params.at("transformer.wte.weight")[5].zero_();
  auto headless = net->forward(torch::full({1, 12}, 7, torch::kLong));
  CHECK(headless.select(2, 5).abs().max().item<double>() == 0);
  // Token data only, and a sequence within its positions.
  CHECK_THAT(test::error_of([] { make_model("gpt", spec_of({12}, 300, 32)); }),
             Catch::Contains("model 'gpt' reads token ids") && Catch::Contains("the data gives one tensor x"));
  auto longer = token_spec(16, 300, 32);
  longer.positions = 8;
  CHECK_THAT(test::error_of([&] { make_model("gpt", longer); }), Catch::Contains("--seq_len 16 is above the model's 8 positions"));
}
