// gputrain benchmark --until / --seeds / --save_recipe, and --device_preset auto preferring a
// recipe measured on this machine.
#include <catch2/catch.hpp>

#include <sched.h>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gputrain;

namespace {

// The cores this process may run on, as the fingerprint counts them.
int usable_cores() {
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  return CPU_COUNT(&set);
}

int csv_lines(const std::string& path) {
  std::istringstream in(test::read_file(path));
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

// The last evaluation's record of a train run's metrics.
nlohmann::json last_eval(const std::string& run) {
  nlohmann::json last;
  for (const auto& r : test::read_jsonl(run + "/metrics.jsonl"))
    if (r["event"] == "eval") last = r;
  return last;
}

}  // namespace

TEST_CASE("bench --until: each variant runs train's own loop to the target, once per seed, with medians and files",
          "[bench][cli]") {
  test::TempDir dir;
  // Reached: smoke's synthetic classes separate within an epoch; with --eval_every 4 the target
  // is met at an evaluation inside the first epoch (16 steps of 32 samples).
  auto r = test::run_gputrain("benchmark --preset smoke --variants baseline,all,batch_x2 --until test_accuracy=0.99 "
                              "--eval_every 4 --seeds 2 --epochs 3 --json " + (dir / "b.json") + " --csv " +
                              (dir / "b.csv") + " --markdown " + (dir / "b.md"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("| To target | Speedup | Worst seed | Steps | Epochs | Reached |"));
  CHECK_THAT(r.out, Catch::Contains("fastest to test_accuracy=0.99: "));
  CHECK_THAT(r.err, Catch::Contains("benchmark: variant 2/3 batch_x2: seed 2/2"));
  auto j = nlohmann::json::parse(test::read_file(dir / "b.json"));
  CHECK(j["settings"]["until"] == "test_accuracy=0.99");
  CHECK(j["settings"]["seeds"] == 2);
  REQUIRE(j["variants"].size() == 3);
  for (const auto& v : j["variants"]) {
    INFO(v.dump());
    const auto& t = v["target"];
    CHECK(t["reached"] == true);
    CHECK(t["reached_count"] == 2);
    REQUIRE(t["runs"].size() == 2);
    CHECK(t["runs"][0]["seed"] == 42);
    CHECK(t["runs"][1]["seed"] == 43);
    const int64_t per_epoch = v["name"] == "batch_x2" ? 8 : 16;
    for (const auto& run : t["runs"]) {
      const int64_t steps = run["steps"];
      CHECK(steps % 4 == 0);  // at an evaluation
      CHECK(steps <= 3 * per_epoch);
      CHECK(run["epochs"].get<double>() == Approx(static_cast<double>(steps) / per_epoch));
      CHECK(run["final_metric"].get<double>() >= 0.99);
      CHECK(run["seconds"].get<double>() > 0);
      CHECK(run["eval_seconds"].get<double>() > 0);
    }
    CHECK(t["seconds"].get<double>() > 0);
    CHECK(t["worst_seconds"].get<double>() >= t["seconds"].get<double>());
  }
  CHECK(j["variants"][0]["target"]["speedup"].get<double>() == 1.0);
  CHECK(csv_lines(dir / "b.csv") == 1 + 3 * 2);  // a header and one line per run
  CHECK_THAT(test::read_file(dir / "b.md"), Catch::Contains("| Optimization | To target |"));

  // Never reached: each run trains its whole schedule, and its last evaluation is the one that
  // `gputrain train` makes with the same seed and recipe.
  auto never = test::run_gputrain("benchmark --preset smoke --variants all --until test_loss=0 --epochs 2 --json " +
                                  (dir / "n.json"));
  INFO(never.out << never.err);
  REQUIRE(never.exit_code == 0);
  CHECK_THAT(never.out, Catch::Contains("not reached") && Catch::Contains("no variant reached test_loss=0"));
  auto n = nlohmann::json::parse(test::read_file(dir / "n.json"));
  const auto& all = n["variants"][1];
  REQUIRE(all["name"] == "all");
  CHECK(all["target"]["reached"] == false);
  CHECK(all["target"]["seconds"].is_null());
  CHECK(all["target"]["runs"][0]["steps"] == 32);
  const auto train = test::run_gputrain("train --preset smoke --epochs 2 --num_workers 2 --output_dir " + (dir / "run"));
  REQUIRE(train.exit_code == 0);
  CHECK(all["target"]["final_metric"].get<double>() == Approx(last_eval(dir / "run")["test_loss"].get<double>()).epsilon(1e-9));
}

TEST_CASE("bench --until: bad targets and flags that do not go with it exit 2", "[bench][cli]") {
  auto r = test::run_gputrain("benchmark --preset smoke --until accuracy --seeds 0");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--until 'accuracy' has no '='"));
  CHECK_THAT(r.err, Catch::Contains("--seeds has value '0'"));
  r = test::run_gputrain("benchmark --preset smoke --until test_acc=0.9 --steps 5");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--until names the metric 'test_acc'"));
  CHECK_THAT(r.err, Catch::Contains("flag --steps times steps; a --until run trains by --epochs"));
  r = test::run_gputrain("benchmark --preset smoke --until test_accuracy=92");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--until test_accuracy=92 is out of range"));
  r = test::run_gputrain("benchmark --preset smoke --seeds 3");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("flag --seeds applies to a --until run"));
  r = test::run_gputrain("benchmark --preset smoke --until test_mae=0.1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--until test_mae: this data is classification"));
}

TEST_CASE("bench --save_recipe: train's --device_preset auto prefers the measured recipe on this machine, falls back "
          "elsewhere with one line, and refuses a corrupt or edited one",
          "[bench][cli]") {
  test::TempDir dir;
  const std::string env = "XDG_CONFIG_HOME=" + (dir / "config");
  const std::string preset = dir / "config/gputrain/presets/smoke-cpu.json";
  auto r = test::run_gputrain("benchmark --preset smoke --variants baseline,all,batch_x2 --until test_accuracy=0.99 "
                              "--eval_every 2 --save_recipe smoke-cpu",
                              env);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("saved the measured recipe 'smoke-cpu'") && Catch::Contains(preset));
  auto p = nlohmann::json::parse(test::read_file(preset));
  CHECK(p["kind"] == "device");
  const auto& m = p["measured"];
  for (const char* key : {"variant", "summary", "figures", "batch_size", "workload", "date", "gputrain_version",
                          "fingerprint", "checksum"})
    CHECK(m.contains(key));
  CHECK(m["fingerprint"]["cpu_cores"] == usable_cores());
  CHECK(m["fingerprint"]["gpu_count"] == 0);
  CHECK(m["workload"]["model"] == "cnn");
  const std::string winner = m["variant"];
  const int64_t batch = m["batch_size"];
  CHECK(batch == (winner == "batch_x2" ? 64 : 32));
  CHECK_THAT(test::run_gputrain("presets", env).out, Catch::Contains("smoke-cpu"));

  // train picks it, says why, and runs its switches and batch size.
  r = test::run_gputrain("train --preset smoke --epochs 1 --output_dir " + (dir / "run1"), env);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("device preset         smoke-cpu (measured on this machine on "));
  auto config = nlohmann::json::parse(test::read_file(dir / "run1/config.json"));
  CHECK(config["resolved"]["batch_size"] == batch);
  CHECK(config["resolved"]["num_workers"] == p["num_workers"]);
  CHECK(config["resolved"]["use_amp"] == p["use_amp"]);

  // Another workload on this machine: the recipe says nothing of it.
  r = test::run_gputrain("train --preset smoke --model mlp --epochs 1 --output_dir " + (dir / "run-mlp"), env);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("measured preset 'smoke-cpu' is for cnn on synthetic: the built-in recipe"));

  // Another machine (here: fewer usable cores) gets the built-in recipe, with the line.
  if (usable_cores() >= 2) {
    r = test::run_gputrain("train --preset smoke --epochs 1 --output_dir " + (dir / "run2"), "taskset -c 0 env " + env);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("device preset         cpu (no CUDA device; measured preset 'smoke-cpu' is for "
                                      "another machine (cpu_cores " + std::to_string(usable_cores()) +
                                      " -> 1): the built-in recipe)"));
    CHECK(nlohmann::json::parse(test::read_file(dir / "run2/config.json"))["resolved"]["batch_size"] == 32);
  }

  // A hand edit (a value changed, the checksum kept) and a corrupt file: exit 2 naming the file,
  // and nothing written.
  const std::string good = test::read_file(preset);
  std::string edited = good;
  const auto at = edited.find("\"cudnn_benchmark\": false");
  REQUIRE(at != std::string::npos);
  edited.replace(at, 24, "\"cudnn_benchmark\": true ");
  test::write_file(preset, edited);
  r = test::run_gputrain("train --preset smoke --epochs 1 --output_dir " + (dir / "run3"), env);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("measured preset '" + preset + "' was edited after it was measured"));
  CHECK_FALSE(std::filesystem::exists(dir / "run3"));
  test::write_file(preset, good.substr(0, good.size() / 2));
  r = test::run_gputrain("train --preset smoke --epochs 1 --output_dir " + (dir / "run3"), env);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(preset));
  CHECK_FALSE(std::filesystem::exists(dir / "run3"));

  // A name that would hide a shipped preset is refused before anything runs.
  r = test::run_gputrain("benchmark --preset smoke --save_recipe cpu", env);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--save_recipe 'cpu' would hide the preset"));
  CHECK_THAT(r.out, !Catch::Contains("variant"));
}

TEST_CASE("bench --until: SIGINT keeps the variants already raced and prints their table", "[bench][cli]") {
  test::TempDir dir;
  // An unreachable target and many epochs: the second variant is still training when the first
  // one's figures are on disk.
  const std::string json = dir / "b.json";
  const auto r = test::interrupt_gputrain_when(
      "benchmark --preset smoke --variants baseline,all --until test_loss=0 --epochs 150 --json " + json, json, 0.5);
  const std::string& out = r.out;
  INFO(out);
  CHECK(r.exit_code == 130);
  auto j = nlohmann::json::parse(test::read_file(json));
  REQUIRE(j["variants"].size() == 1);
  CHECK(j["variants"][0]["name"] == "baseline");
  CHECK(j["variants"][0]["target"]["runs"][0]["steps"] == 150 * 16);
  CHECK_THAT(j["verdict"].get<std::string>(), Catch::EndsWith("(stopped by SIGINT)"));
  CHECK_THAT(out, Catch::Contains("To target") && Catch::Contains("not reached"));
}

TEST_CASE("bench --until: a seed whose loss goes non-finite is recorded as not reached, and the race goes on",
          "[bench][cli]") {
  test::TempDir dir;
  // Every step from step 3 on gets a NaN input: each run stops on the NaN guard.
  auto r = test::run_gputrain("benchmark --preset smoke --variants baseline,all --until test_accuracy=0.99 --seeds 2 "
                              "--max_bad_steps 2 --csv " + (dir / "b.csv"),
                              "GPUTRAIN_FAULT_NAN_STEP=3");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("no variant reached test_accuracy=0.99"));
  const std::string csv = test::read_file(dir / "b.csv");
  CHECK(csv_lines(dir / "b.csv") == 1 + 2 * 2);
  CHECK_THAT(csv, Catch::Contains("baseline,ok,,43,false,") && Catch::Contains("all,ok,,43,false,") &&
                      Catch::Contains("the loss was not finite"));
}
