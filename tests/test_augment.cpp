// RandAugment and TrivialAugmentWide: every operation and magnitude table against torchvision's.
#include <catch2/catch.hpp>

#include <fstream>

#include <fmt/format.h>

#include "data/augment.h"
#include "test_python.h"
#include "test_util.h"

using namespace gputrain;

TEST_CASE("augment: each RandAugment and TrivialAugmentWide operation equals torchvision v2's", "[data][python]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::ofstream cases(dir / "cases"), tables(dir / "tables");
  const AutoAugment rand("rand-m9-n2"), wide("trivialaugmentwide");
  int n = 0;
  for (const auto& [c, h, w] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{3, 23, 31}, {1, 16, 16}}) {
    // Smooth shading plus noise, so that every operation changes something.
    Rng rng(static_cast<uint64_t>(c * 100 + h));
    std::vector<float> img(static_cast<size_t>(c * h * w));
    for (int64_t i = 0; i < c * h * w; ++i)
      img[static_cast<size_t>(i)] = std::clamp(0.2f + 0.5f * static_cast<float>(i % w) / static_cast<float>(w) +
                                                   0.3f * rng.uniform(),
                                               0.0f, 1.0f);
    const std::string in = fmt::format("in{}.f32", c);
    test::write_file(dir / in, std::string(reinterpret_cast<const char*>(img.data()), img.size() * sizeof(float)));
    for (AugmentOp op : rand.ops()) {
      for (const AutoAugment* policy : {&rand, &wide})
        for (int64_t bin : {0, 5, 9, 20, 30})
          tables << fmt::format("{} {} {} {} {} {:.9g}\n", policy == &rand ? "rand" : "trivial", augment_op_name(op),
                                bin, h, w, policy->magnitude(op, bin, h, w));
      for (int64_t bin : {4, 9, 20, 30})
        for (double sign : {1.0, -1.0}) {
          if (sign < 0 && !augment_op_signed(op)) continue;
          const double m = sign * wide.magnitude(op, bin, h, w);
          auto out = img;
          apply_augment_op(op, m, out.data(), c, h, w);
          const std::string name = fmt::format("out{}.f32", n++);
          test::write_file(dir / name, std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float)));
          cases << fmt::format("{} {:.9g} {} {} {} {} {}\n", augment_op_name(op), m, c, h, w, in, name);
        }
    }
  }
  cases.close();
  tables.close();
  std::string log;
  const int rc = test::python("augment_check.py " + dir.path.string(), log);
  INFO(log);
  CHECK(rc == 0);
  if (log.find("torchvision absent") != std::string::npos)
    WARN("torchvision is not installed (.pydeps): augmentations not compared");
  else
    CHECK_THAT(log, Catch::Contains("augment: 0 mismatches"));
}

TEST_CASE("augment: a policy draws its operations from the sample's seed, and --aa is checked", "[data][cli]") {
  const AutoAugment wide("trivialaugmentwide");
  std::vector<float> a(3 * 16 * 16), b;
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) / 17.0f;
  b = a;
  Rng r1(5), r2(5);
  wide.apply(a.data(), {3, 16, 16}, r1);
  wide.apply(b.data(), {3, 16, 16}, r2);
  CHECK(a == b);
  CHECK(AutoAugment::valid("rand-m9-n2"));
  CHECK(AutoAugment::valid("rand"));
  CHECK_FALSE(AutoAugment::valid("rand-m31"));
  CHECK_FALSE(AutoAugment::valid("augmix"));
  for (const std::string bad : {"rand-m40", "rand-m99999999999"}) {
    auto r = test::run_gputrain("train --dataset synthetic --input_shape 3x8x8 --aa " + bad);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("aa '" + bad + "' is not a policy"));
  }
  test::TempDir dir;
  auto ok = test::run_gputrain(
      "train --dataset synthetic --input_shape 3x8x8 --synthetic_train_size 64 --synthetic_test_size 16 --model cnn "
      "--width 4 --batch_size 16 --epochs 1 --aa trivialaugmentwide --output_dir " + (dir / "run"));
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
}
