// The sample schema and the batch that carries it: fields as train prints and records them, cut and
// copied alike.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "data/batch.h"
#include "data/jsonl_dataset.h"
#include "data/loader.h"
#include "data/schema.h"
#include "data/synthetic.h"
#include "train/checkpoint.h"
#include "test_errors.h"
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

TEST_CASE("jsonl: named fields of ragged int64 lists are padded per batch, labels with -100, with each sample's length",
          "[data]") {
  test::TempDir dir;
  test::write_file(dir / "t.jsonl",
                   "{\"input_ids\": [5, 6, 7], \"attention_mask\": [1, 1, 0], \"labels\": [6, 7, -100]}\n"
                   "\n"
                   "{\"input_ids\": [8], \"attention_mask\": [1], \"labels\": [2]}\n"
                   "{\"input_ids\": [1, 2, 3, 4, 5], \"attention_mask\": [1, 1, 1, 1, 1], \"labels\": [2, 3, 4, 5, 9]}\n");
  auto data = load_jsonl_dataset(dir / "t.jsonl", "", 0);
  const SampleSchema schema = schema_of(*data);
  CHECK(schema.text() ==
        "input_ids: i64[-1] pad 0, attention_mask: i64[-1] pad 0, labels: i64[-1] pad -100 (target), length: i64[]");
  CHECK(data->num_classes() == 10);  // the largest label + 1
  CHECK(schema.find("input_ids")->longest == 5);
  LoaderOptions o;
  o.batch_size = 2;
  Loader loader(data, o);
  loader.start_epoch(0);
  for (int round = 0; round < 3; ++round) {  // the staging slots are reused: the pool stays small
    auto first = loader.next();
    REQUIRE(first);
    CHECK(first->names == std::vector<std::string>{"input_ids", "attention_mask", "labels", "length"});
    CHECK(first->target == "labels");
    CHECK(first->y().equal(torch::tensor({6, 7, -100, 2, -100, -100}).reshape({2, 3})));
    CHECK(first->at("input_ids").equal(torch::tensor({5, 6, 7, 8, 0, 0}).reshape({2, 3})));
    CHECK(first->at("length").equal(torch::tensor({3, 1})));
    auto last = loader.next();  // the partial batch: its own longest
    REQUIRE(last);
    CHECK(last->at("attention_mask").sizes() == torch::IntArrayRef({1, 5}));
    CHECK_FALSE(loader.next());
    loader.start_epoch(round + 1);
  }
  CHECK(loader.staging_buffers() <= 2);
}

TEST_CASE("jsonl: malformed lines, a missing target and test classes beyond training are named with the file and line",
          "[data]") {
  test::TempDir dir;
  auto error = [&](const std::string& text, const std::string& target = "") {
    test::write_file(dir / "bad.jsonl", text);
    return test::error_of([&] { load_jsonl_dataset(dir / "bad.jsonl", target, 0); });
  };
  CHECK_THAT(error("{\"ids\": [1], \"labels\": [1]}\n{\"ids\": [1]}\n"), Catch::Contains("line 2: 1 fields, the first line has 2"));
  CHECK_THAT(error("{\"ids\": [1], \"labels\": 1}\n{\"ids\": [\"a\"], \"labels\": 0}\n"),
             Catch::Contains("line 2: 'ids' holds string, not a number"));
  CHECK_THAT(error("{\"ids\": [1], \"mask\": [1]}\n"), Catch::Contains("no target field (labels, label or y) among ids, mask"));
  CHECK_THAT(error("{\"ids\": [1], \"labels\": [-3]}\n"), Catch::Contains("target 'labels' holds -3"));
  CHECK_THAT(error("{\"ids\": [1], \"label\": 9223372036854775807}\n"),
             Catch::Contains("line 1: 'label' holds 9223372036854775807, too large for an id or a class"));
  test::write_file(dir / "floats.jsonl", "{\"x\": [1.5, 9223372036854775807], \"label\": 0}\n");  // float32: fine
  CHECK(schema_of(*load_jsonl_dataset(dir / "floats.jsonl", "", 0)).find("x")->dtype == DType::kF32);
  // A sample's mask and per-token labels go with its ids one for one.
  CHECK_THAT(error("{\"input_ids\": [1, 2], \"attention_mask\": [1], \"labels\": 0}\n"),
             Catch::Contains("bad.jsonl: sample 1 has 1 'attention_mask' values and 2 input_ids"));
  CHECK_THAT(error("{\"input_ids\": [1, 2], \"labels\": [1, 2]}\n{\"input_ids\": [3], \"labels\": [1, 2, 3]}\n"),
             Catch::Contains("sample 2 has 3 'labels' values and 1 input_ids"));
  // Ids below 0 are known to the schema (a model with an embedding refuses them, models/imported).
  test::write_file(dir / "negative.jsonl", "{\"input_ids\": [4, -2], \"label\": 0}\n");
  CHECK(schema_of(*load_jsonl_dataset(dir / "negative.jsonl", "", 0)).find("input_ids")->smallest == -2);
  test::write_file(dir / "train.jsonl", "{\"ids\": [1, 2], \"label\": 1}\n{\"ids\": [3], \"label\": 0}\n");
  test::write_file(dir / "test.jsonl", "{\"ids\": [1], \"label\": 4}\n");
  auto train = load_jsonl_dataset(dir / "train.jsonl", "", 0);
  CHECK(schema_of(*train).text() == "ids: i64[-1] pad 0, label: i64[] (target), length: i64[]");
  CHECK_THAT(test::error_of([&] { load_jsonl_dataset(dir / "test.jsonl", "", 0, train.get()); }),
             Catch::Contains("holds class 4, beyond the 2 classes of the training data"));
  CHECK_THAT(error("{\"ids\": [1], \"label\": -100}\n"), Catch::Contains("target 'label' holds -100; classes are 0 or more"));
  test::write_file(dir / "scalar.jsonl", "{\"ids\": 3, \"label\": 1}\n");
  CHECK_THAT(test::error_of([&] { load_jsonl_dataset(dir / "scalar.jsonl", "", 0, train.get()); }),
             Catch::Contains("fields ids: i64[], label: i64[] (target) differ from the training data's ids: i64[-1]"));
  // One layout for both splits: labels that vary in training vary in a test file of equal
  // lengths too, padded with -100, up to the longer split's longest.
  test::write_file(dir / "tok.jsonl", "{\"ids\": [1, 2], \"labels\": [2, 0]}\n{\"ids\": [3], \"labels\": [1]}\n");
  test::write_file(dir / "tok_test.jsonl", "{\"ids\": [1, 2, 3], \"labels\": [2, 0, 1]}\n");
  auto tok = load_jsonl_dataset(dir / "tok.jsonl", "", 0);
  auto tok_test = load_jsonl_dataset(dir / "tok_test.jsonl", "", 0, tok.get());
  CHECK(schema_of(*tok_test).text() == schema_of(*tok).text());
  CHECK(schema_of(*tok_test).text() == "ids: i64[-1] pad 0, labels: i64[-1] pad -100 (target), length: i64[]");
  CHECK(schema_of(*tok).find("labels")->longest == 3);
  // A float target of fixed size is regression.
  test::write_file(dir / "reg.jsonl", "{\"x\": [1.5, 2], \"y\": [0.5, 1]}\n{\"x\": [1, 2], \"y\": [2, 3]}\n");
  auto reg = load_jsonl_dataset(dir / "reg.jsonl", "", 0);
  CHECK(reg->is_regression());
  CHECK(schema_of(*reg).text() == "x: f32[2], y: f32[2]");
}
