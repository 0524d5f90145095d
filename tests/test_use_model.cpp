// Using a trained model (eval, infer) and the task options (losses, top-5, per-target metrics,
// early stopping), through the built binary as a user runs it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "test_util.h"

using namespace gputrain;
using test::read_jsonl;
using test::run_gputrain;

namespace {

const std::string kSmoke = "train --preset smoke --epochs 1 --monitor_interval 0 ";

nlohmann::json last_of(const std::string& metrics, const std::string& event) {
  nlohmann::json found;
  for (const auto& r : read_jsonl(metrics))
    if (r["event"] == event) found = r;
  REQUIRE(!found.is_null());
  return found;
}

int64_t count_lines(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// y = (a - b, 2a) + noise: two regression targets.
std::string regression_csv(int rows) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  std::string csv = "a,b,y1,y2\n";
  for (int i = 0; i < rows; ++i) {
    double a = u(rng), b = u(rng);
    csv += std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(a - b + 0.01 * u(rng)) + "," +
           std::to_string(2 * a) + "\n";
  }
  return csv;
}

}  // namespace

TEST_CASE("eval reproduces the test metrics that training reported for the checkpoint", "[use]") {
  test::TempDir dir;
  auto r = run_gputrain(kSmoke + "--num_classes 6 --output_dir " + (dir / "run"));
  REQUIRE(r.exit_code == 0);
  auto trained = last_of(dir / "run/metrics.jsonl", "eval");
  auto e = run_gputrain("eval --checkpoint " + (dir / "run/checkpoints/last.pt") + " --json " + (dir / "eval.json"));
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  CHECK_THAT(e.out, Catch::Contains("accuracy") && Catch::Contains("top-5"));
  auto j = nlohmann::json::parse(test::read_file(dir / "eval.json"));
  CHECK(j["test_accuracy"].get<double>() == trained["test_accuracy"].get<double>());
  CHECK(j["test_top5"].get<double>() == trained["test_top5"].get<double>());
  CHECK(j["test_loss"].get<double>() == Approx(trained["test_loss"].get<double>()).epsilon(1e-9));
}

TEST_CASE("infer writes one row per sample and sweeps batch sizes", "[use]") {
  test::TempDir dir;
  REQUIRE(run_gputrain(kSmoke + "--output_dir " + (dir / "run")).exit_code == 0);
  auto r = run_gputrain("infer --checkpoint " + (dir / "run/checkpoints/last.pt") + " --out " + (dir / "preds.csv") +
                        " --batch_sizes 1,16,64");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("samples/s") && Catch::Contains("p99 ms") && Catch::Contains("peak RSS") && Catch::Contains(" MiB\n"));
  for (const char* row : {"\n         1 ", "\n        16 ", "\n        64 "}) CHECK_THAT(r.out, Catch::Contains(row));
  CHECK(count_lines(dir / "preds.csv") == 128 + 1);  // smoke: 128 test samples, and the header
  CHECK(test::read_file(dir / "preds.csv").rfind("index,target,prediction,probability\n0,", 0) == 0);
}

TEST_CASE("regression: L1 and Huber losses, per-target MAE and RMSE, infer columns", "[use]") {
  test::TempDir dir;
  test::write_file(dir / "train.csv", regression_csv(300));
  const std::string data = " --dataset csv --train_file " + (dir / "train.csv") +
                           " --target y1,y2 --model mlp --width 32 --epochs 4 --batch_size 16 --lr 0.01"
                           " --lr_schedule constant --monitor_interval 0";
  for (const char* loss : {"l1", "huber"}) {
    auto run = dir / (std::string("run-") + loss);
    auto r = run_gputrain("train" + data + " --loss " + loss + " --output_dir " + run);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    auto ev = last_of(run + "/metrics.jsonl", "eval");
    REQUIRE(ev["test_mae_per_target"].size() == 2);
    REQUIRE(ev["test_rmse_per_target"].size() == 2);
    CHECK(ev["test_mae"].get<double>() < 0.3);  // targets spread over [-2, 2]
    CHECK(ev["test_rmse_per_target"][0].get<double>() >= ev["test_mae_per_target"][0].get<double>());
  }
  auto r = run_gputrain("infer --checkpoint " + (dir / "run-l1/checkpoints/last.pt") + " --out " + (dir / "p.csv"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(test::read_file(dir / "p.csv").rfind("index,target_0,target_1,prediction_0,prediction_1\n", 0) == 0);
  CHECK(count_lines(dir / "p.csv") == 30 + 1);  // 10% of 300 held out
}

TEST_CASE("early stopping ends the run when the monitored metric stops improving", "[use]") {
  test::TempDir dir;
  // lr 0: nothing improves after the first evaluation.
  auto r = run_gputrain(kSmoke + "--epochs 10 --lr 0 --early_stopping 2 --monitor_metric loss --output_dir " +
                        (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("early stopping: no better test loss for 2 evaluations"));
  auto summary = read_jsonl(dir / "run/metrics.jsonl").back();
  CHECK(summary["early_stopped"] == true);
  CHECK(summary["epoch"] == 2);  // evaluations after epochs 1, 2, 3: the last two did not improve
  CHECK(summary.contains("best_test_loss"));
  // Resuming a run that stopped early trains no further.
  auto again = run_gputrain(kSmoke + "--epochs 10 --lr 0 --early_stopping 2 --monitor_metric loss --output_dir " +
                            (dir / "run") + " --resume auto");
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  auto after = read_jsonl(dir / "run/metrics.jsonl").back();
  CHECK(after["step"] == summary["step"]);
  CHECK(after["best_test_loss"] == summary["best_test_loss"]);
}

TEST_CASE("eval and infer refuse bad input with one line and exit 2", "[use]") {
  test::TempDir dir;
  for (const std::string& args : std::vector<std::string>{"eval", "eval --checkpoint " + (dir / "none.pt"),
                                                          "infer --checkpoint " + (dir / "none.pt"),
                                                          "infer --checkpoint x.pt --batch_sizes 8,zero"}) {
    auto r = run_gputrain(args);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: "));
  }
  // Task options that do not fit the data are refused before training starts.
  for (const auto& [flags, expect] : std::vector<std::pair<std::string, std::string>>{
           {"--monitor_metric mae", "monitor_metric 'mae' is for regression"},
           {"--monitor_metric top5", "needs 5 classes or more"},
           {"--loss huber", "--loss huber is for regression"}}) {
    auto r = run_gputrain(kSmoke + flags + " --output_dir " + (dir / "run"));
    INFO(flags << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(expect));
    CHECK_FALSE(std::filesystem::exists(dir / "run/metrics.jsonl"));
  }
}

TEST_CASE("ema: the average is evaluated, checkpointed and re-evaluated by eval", "[use]") {
  test::TempDir dir;
  auto r = run_gputrain(kSmoke + "--epochs 2 --ema_decay 0.9 --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("ema: test loss"));
  auto trained = last_of(dir / "run/metrics.jsonl", "eval");
  REQUIRE(trained.contains("test_ema_loss"));
  CHECK(trained["test_ema_loss"] != trained["test_loss"]);  // a different set of weights
  auto e = run_gputrain("eval --checkpoint " + (dir / "run/checkpoints/last.pt") + " --json " + (dir / "e.json"));
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  auto j = nlohmann::json::parse(test::read_file(dir / "e.json"));
  CHECK(j["test_ema_loss"].get<double>() == Approx(trained["test_ema_loss"].get<double>()).epsilon(1e-9));
  CHECK(j["test_loss"].get<double>() == Approx(trained["test_loss"].get<double>()).epsilon(1e-9));
}

TEST_CASE("model options a model does not use are refused, not ignored", "[use]") {
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--model cnn --heads 2", "--heads"},       {"--model mlp --depth 3", "--depth"},
      {"--model cnn --stem imagenet", "--stem"},  {"--model mlp --grad_checkpointing", "--grad_checkpointing"},
      {"--model cnn --dropout 0.1", "--dropout"},
  };
  for (const auto& [flags, named] : cases) {
    auto r = run_gputrain(kSmoke + flags + " --output_dir " + (dir / "run"));
    INFO(flags << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(named + " is for"));
  }
}
