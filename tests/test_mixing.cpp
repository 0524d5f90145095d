// MixUp, CutMix and random erasing against timm's definitions, on hand-computed batches.
#include <catch2/catch.hpp>

#include <cmath>

#include <torch/torch.h>

#include "data/mixing.h"
#include "data/transforms.h"
#include "test_util.h"
#include "step/loss.h"

using namespace gputrain;

TEST_CASE("mixing: MixUp of a hand-checked batch, targets smoothed and mixed as timm's mixup_target", "[data]") {
  // Three 1x2x2 images; sample i is mixed with sample 2 - i, the middle one with itself.
  std::vector<float> x = {1, 2, 3, 4, 10, 20, 30, 40, 100, 200, 300, 400};
  const std::vector<int64_t> labels = {0, 2, 1};
  MixOptions o;
  o.mixup_alpha = 0.8;
  o.smoothing = 0.1;
  o.classes = 3;
  MixDraw d;
  d.lam = 0.7;
  std::vector<float> t(9);
  apply_mix(o, d, x.data(), 3, 1, 2, 2, labels.data(), t.data());
  const std::vector<float> mixed = {0.7f * 1 + 0.3f * 100, 0.7f * 2 + 0.3f * 200, 0.7f * 3 + 0.3f * 300,
                                    0.7f * 4 + 0.3f * 400};
  for (int k = 0; k < 4; ++k) {
    CHECK(x[k] == Approx(mixed[k]).epsilon(1e-6));
    CHECK(x[8 + k] == Approx(0.7 * (100 * (k + 1)) + 0.3 * (k + 1)).epsilon(1e-6));
    CHECK(x[4 + k] == Approx(10 * (k + 1)).epsilon(1e-6));
  }
  // off = 0.1 / 3, on = 1 - 0.1 + off; sample 0 is 0.7 of class 0 and 0.3 of class 1.
  const double off = 0.1 / 3, on = 0.9 + off;
  const std::vector<double> want = {0.7 * on + 0.3 * off, 0.7 * off + 0.3 * on, off,  // 0 with 2 (label 1)
                                    off, off, on,                                     // 1 with itself
                                    0.7 * off + 0.3 * on, 0.7 * on + 0.3 * off, off};  // 2 (label 1) with 0
  for (int k = 0; k < 9; ++k) CHECK(t[k] == Approx(want[k]).epsilon(1e-6));
}

TEST_CASE("mixing: CutMix's box and area-corrected lambda, as timm's rand_bbox and correct_lam", "[data]") {
  // lam 0.6 on 10x10: cut = int(10 * sqrt(0.4)) = 6, half 3; centre (3, 8): rows 0-6, columns
  // 5-10 (clipped), 30 pixels, so lam becomes 1 - 30/100.
  MixDraw d = cutmix_box(0.6, 10, 10, 3, 8);
  CHECK((d.top == 0 && d.bottom == 6 && d.left == 5 && d.right == 10));
  CHECK(d.lam == Approx(0.7));
  // lam 0.75 on 10x10: cut 5, half 2; centre (9, 0): rows 7-10, columns 0-2, 6 pixels.
  d = cutmix_box(0.75, 10, 10, 9, 0);
  CHECK((d.top == 7 && d.bottom == 10 && d.left == 0 && d.right == 2));
  CHECK(d.lam == Approx(0.94));
  // Two 2x10x10 images: the box swaps between them, the rest stays, targets follow the area.
  std::vector<float> x(2 * 2 * 100);
  for (size_t i = 0; i < 200; ++i) x[i] = 1;
  const std::vector<int64_t> labels = {1, 0};
  MixOptions o;
  o.cutmix_alpha = 1;
  o.classes = 2;
  std::vector<float> t(4);
  d = cutmix_box(0.6, 10, 10, 3, 8);
  apply_mix(o, d, x.data(), 2, 2, 10, 10, labels.data(), t.data());
  for (int img = 0; img < 2; ++img)
    for (int c = 0; c < 2; ++c)
      for (int y = 0; y < 10; ++y)
        for (int k = 0; k < 10; ++k) {
          const bool in_box = y < 6 && k >= 5;
          const float own = img == 0 ? 1.0f : 0.0f;
          CHECK(x[((img * 2 + c) * 10 + y) * 10 + k] == (in_box ? 1.0f - own : own));
        }
  CHECK(t == std::vector<float>{0.3f, 0.7f, 0.7f, 0.3f});
}

TEST_CASE("mixing: Beta draws have Beta's mean and variance, and the batch draw follows the switches", "[data]") {
  for (double a : {0.2, 0.8, 1.0, 2.0}) {
    Rng rng(3);
    double sum = 0, sq = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      const double v = beta_sample(a, a, rng);
      REQUIRE((v >= 0 && v <= 1));
      sum += v;
      sq += v * v;
    }
    const double mean = sum / n, var = sq / n - mean * mean;
    INFO(a);
    CHECK(mean == Approx(0.5).margin(0.01));
    CHECK(var == Approx(a * a / (4 * a * a * (2 * a + 1))).epsilon(0.05));
  }
  MixOptions o;
  o.mixup_alpha = o.cutmix_alpha = 1;
  o.classes = 10;
  Rng rng(1);
  o.switch_prob = 1;
  CHECK(draw_mix(o, 8, 8, rng).cutmix);
  o.switch_prob = 0;
  CHECK_FALSE(draw_mix(o, 8, 8, rng).cutmix);
  o.prob = 0;
  CHECK(draw_mix(o, 8, 8, rng).lam == 1.0);
}

TEST_CASE("mixing: the soft-target loss is the cross-entropy against the mixed distribution", "[data]") {
  auto logits = torch::tensor({{1.0, 2.0, 0.5}, {0.1, -1.0, 3.0}});
  auto target = torch::tensor({{0.7, 0.3, 0.0}, {0.1, 0.1, 0.8}});
  LossSpec spec;
  spec.soft_targets = true;
  const double want = -(target * torch::log_softmax(logits, -1)).sum(-1).mean().item<double>();
  CHECK(task_loss(logits, target.to(torch::kFloat), spec).item<double>() == Approx(want));
  // One-hot targets give the plain cross-entropy.
  auto hard = torch::tensor({1, 2});
  CHECK(task_loss(logits, torch::one_hot(hard, 3).to(torch::kFloat), spec).item<double>() ==
        Approx(task_loss(logits, hard).item<double>()));
}

TEST_CASE("random erasing: a box of 2% to 1/3 of the image, filled as the mode says", "[data]") {
  const std::vector<int64_t> shape = {3, 32, 32};
  for (const std::string mode : {"const", "rand", "pixel"})
    for (uint64_t seed = 0; seed < 20; ++seed) {
      std::vector<float> x(3 * 32 * 32, 5.0f);
      Rng rng(seed);
      RandomErasing(1.0, mode, 1).apply(x.data(), shape, rng);
      int64_t top = 32, bottom = -1, left = 32, right = -1, changed = 0;
      for (int64_t y = 0; y < 32; ++y)
        for (int64_t k = 0; k < 32; ++k)
          if (x[static_cast<size_t>(y * 32 + k)] != 5.0f) {
            ++changed;
            top = std::min(top, y), bottom = std::max(bottom, y), left = std::min(left, k), right = std::max(right, k);
          }
      INFO(mode << " seed " << seed);
      REQUIRE(changed > 0);
      CHECK(changed == (bottom - top + 1) * (right - left + 1));  // one rectangle
      CHECK(changed >= 0.02 * 1024 * 0.7);                       // rounding of the sides
      CHECK(changed <= 1024.0 / 3 * 1.3);
      // const: zeros; rand: one value per channel; pixel: values that differ within the box.
      const float first = x[static_cast<size_t>(top * 32 + left)];
      const float other = x[static_cast<size_t>(bottom * 32 + right)];
      if (mode == "const") CHECK((first == 0 && other == 0));
      if (mode == "rand") CHECK(first == other);
      if (mode == "pixel" && changed > 1) CHECK(first != other);
    }
  std::vector<float> x(3 * 32 * 32, 5.0f);
  Rng rng(0);
  RandomErasing(0.0, "const", 1).apply(x.data(), shape, rng);
  CHECK(x == std::vector<float>(3 * 32 * 32, 5.0f));
}

TEST_CASE("mixing: --mixup and --cutmix train, are recorded, and are refused where they mean nothing", "[data][cli]") {
  test::TempDir dir;
  const std::string base = "train --dataset synthetic --input_shape 3x8x8 --synthetic_train_size 64 --synthetic_test_size "
                           "16 --model cnn --width 4 --batch_size 16 --epochs 1 --device cpu ";
  auto r = test::run_gputrain(base + "--mixup 0.8 --cutmix 1.0 --label_smoothing 0.1 --reprob 0.25 --output_dir " +
                              (dir / "run"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  const std::string config = test::read_file(dir / "run/config.json");
  CHECK_THAT(config, Catch::Contains("\"mixup\": 0.8") && Catch::Contains("\"cutmix\": 1.0") &&
                         Catch::Contains("\"reprob\": 0.25"));
  auto table = test::run_gputrain("train --dataset synthetic --input_shape 20 --mixup 0.2");
  CHECK(table.exit_code == 2);
  CHECK_THAT(table.err, Catch::Contains("--mixup need image samples"));
  auto prob = test::run_gputrain(base + "--mixup_prob 0.5");
  CHECK(prob.exit_code == 2);
  CHECK_THAT(prob.err, Catch::Contains("--mixup_prob and --mixup_switch_prob are for --mixup or --cutmix"));
  auto mode = test::run_gputrain(base + "--remode const");
  CHECK(mode.exit_code == 2);
  CHECK_THAT(mode.err, Catch::Contains("--remode and --recount are for random erasing"));
}
