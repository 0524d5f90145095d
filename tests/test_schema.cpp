// The sample schema: each dataset's fields as train prints them and the run's record keeps them.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "data/schema.h"
#include "data/synthetic.h"
#include "train/checkpoint.h"
#include "test_util.h"

using namespace gputrain;

namespace {

// Regression rows of 5 features and 3 targets.
struct Rows : Dataset {
  int64_t size() const override { return 4; }
  std::vector<int64_t> sample_shape() const override { return {5}; }
  int64_t num_classes() const override { return 0; }
  std::vector<int64_t> target_shape() const override { return {3}; }
  int64_t get(int64_t, float*, float*, uint64_t) const override { return 0; }
};

}  // namespace

TEST_CASE("schema: a classifier's sample is x f32 and y i64, a regression's y f32 of its targets", "[data]") {
  const SampleSchema images = schema_of(SyntheticDataset(8, {1, 4, 4}, 3, 1));
  CHECK(images.text() == "x: f32[1,4,4], y: i64[]");
  CHECK(images.to_json() == nlohmann::json::parse(R"({"x": {"dtype": "f32", "shape": [1, 4, 4]},
                                                      "y": {"dtype": "i64", "shape": []}})"));
  CHECK(schema_of(Rows()).text() == "x: f32[5], y: f32[3]");
  // A size that varies per sample is padded per batch, with its pad value (-100: an ignored label).
  const SampleSchema tokens{{{"input_ids", DType::kI64, {-1}, 0}, {"labels", DType::kI64, {-1}, -100}}};
  CHECK(tokens.text() == "input_ids: i64[-1] pad 0, labels: i64[-1] pad -100");
  CHECK(tokens.to_json()["labels"] == nlohmann::json::parse(R"({"dtype": "i64", "shape": [-1], "pad": -100.0})"));
}

TEST_CASE("schema: train prints the sample's fields and keeps them in config.json and every checkpoint", "[data][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain("train --preset smoke --epochs 1 --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("\nschema: x: f32[1,16,16], y: i64[]\n"));
  const auto config = nlohmann::json::parse(test::read_file(dir / "run/config.json"));
  CHECK(config["schema"] == nlohmann::json::parse(R"({"x": {"dtype": "f32", "shape": [1, 16, 16]},
                                                      "y": {"dtype": "i64", "shape": []}})"));
  const auto kept = nlohmann::json::parse(read_checkpoint_meta(dir / "run/checkpoints/last.pt").config_json);
  CHECK(kept["schema"] == config["schema"]);
}
