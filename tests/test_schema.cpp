// The sample schema and the batch that carries it: fields as train prints and records them, cut and
// copied alike.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "data/batch.h"
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

TEST_CASE("batch: every field is cut, copied and compared alike, and a missing field is named", "[data]") {
  Batch b(torch::arange(12, torch::kFloat).reshape({6, 2}), torch::arange(6, torch::kLong));
  b.names.push_back("mask");
  b.tensors.push_back(torch::ones({6, 3}, torch::kLong));
  CHECK(b.samples() == 6);
  CHECK(b.shape_text() == "x 6x2, y 6, mask 6x3");
  const auto parts = b.chunk(4);  // as torch::chunk: pieces of 2, 2, 2
  REQUIRE(parts.size() == 3);
  CHECK(parts[1].names == b.names);
  CHECK(torch::equal(parts[1].y(), torch::tensor({2, 3}, torch::kLong)));
  CHECK(parts[2].at("mask").sizes() == torch::IntArrayRef({2, 3}));
  const Batch rows = b.narrow(1, 3);
  CHECK(torch::equal(rows.x(), b.x().narrow(0, 1, 3)));
  CHECK(rows.at("mask").size(0) == 3);
  CHECK(b.same_layout(b.map([](const torch::Tensor& t) { return t.clone(); })));
  CHECK_FALSE(b.same_layout(rows));
  CHECK_FALSE(b.same_layout(b.map([](const torch::Tensor& t) { return t.to(torch::kDouble); })));
  CHECK_THROWS_WITH(b.at("labels"), "the batch has no field 'labels'");
}
