// A run never lies about what it holds: a target that ends it, a kill inside any save, resumes
// that change flags or data. Each case runs the real binary on a real run folder.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "train/checkpoint.h"
#include "weights/safetensors.h"

using namespace gputrain;
namespace fs = std::filesystem;

namespace {

// metrics.jsonl's records of one kind.
std::vector<nlohmann::json> records(const std::string& run, const std::string& event) {
  std::vector<nlohmann::json> out;
  std::istringstream in(test::read_file(run + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);)
    if (auto r = nlohmann::json::parse(line); r["event"] == event) out.push_back(r);
  return out;
}

nlohmann::json status(const std::string& run) { return nlohmann::json::parse(test::read_file(run + "/status.json")); }

}  // namespace

TEST_CASE("train --until stops at the evaluation that reaches the target, and says so", "[run_truth]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  // Any first evaluation has a cross-entropy below 100: the run ends after epoch 1 of 5.
  auto r = test::run_gputrain("train --preset smoke --epochs 5 --until test_loss=100 --output_dir " + run);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("target test_loss=100 reached at step 16"));
  CHECK_THAT(r.out, Catch::Contains("ended by target test_loss=100 reached"));
  CHECK(records(run, "eval").size() == 1);
  const auto summary = records(run, "summary").back();
  CHECK(summary["step"] == 16);
  CHECK(summary["target"] == "test_loss=100");
  CHECK(summary["target_reached"] == true);
  CHECK(summary["ended_by"] == "target test_loss=100 reached");
  CHECK(status(run)["state"] == "finished");
  CHECK(status(run)["reason"] == "target test_loss=100 reached");
  CHECK(fs::exists(run + "/checkpoints/best.pt"));

  // The resume keeps the target: the run is finished; a harder target trains on.
  auto again = test::run_gputrain("train --output_dir " + run + " --resume auto");
  INFO(again.out << again.err);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("the run is finished (its last evaluation reached test_loss=100"));
  CHECK(records(run, "eval").size() == 1);
  auto harder = test::run_gputrain("train --output_dir " + run + " --resume auto --until test_loss=0.000001");
  INFO(harder.out << harder.err);
  CHECK(harder.exit_code == 0);
  CHECK(records(run, "eval").size() == 5);  // not reached: every epoch ran
  CHECK(records(run, "summary").back()["target_reached"] == false);
  CHECK_FALSE(records(run, "summary").back().contains("ended_by"));
  CHECK_FALSE(status(run).contains("reason"));
}

TEST_CASE("train --until: a wrong metric or value is refused before anything is written", "[run_truth]") {
  test::TempDir dir;
  auto bad = test::run_gputrain("train --preset smoke --until test_foo=1 --output_dir " + (dir / "a"));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--until names the metric 'test_foo'") && Catch::Contains("test_accuracy"));
  auto value = test::run_gputrain("train --preset smoke --until test_accuracy=2 --output_dir " + (dir / "b"));
  CHECK(value.exit_code == 2);
  CHECK_THAT(value.err, Catch::Contains("--until test_accuracy=2 is out of range"));
  auto misfit = test::run_gputrain("train --preset smoke --until test_mae=0.1 --output_dir " + (dir / "c"));
  CHECK(misfit.exit_code == 2);
  CHECK_THAT(misfit.err, Catch::Contains("--until test_mae"));
  for (const char* d : {"a", "b", "c"}) CHECK_FALSE(fs::exists(dir / d));
}

TEST_CASE("a kill inside any save after the best evaluation: the resumed run still has its best.pt", "[run_truth]") {
  // One epoch saves epoch-1.pt, last.pt, then best.pt (its evaluation is the first, so the best):
  // a SIGKILL inside each one in turn, then --resume auto to the end.
  for (int save : {1, 2, 3}) {
    DYNAMIC_SECTION("killed inside save " << save) {
      test::TempDir dir;
      const std::string run = dir / "run";
      auto killed = test::run_gputrain("train --preset smoke --epochs 1 --output_dir " + run,
                                       "GPUTRAIN_FAULT_KILL_IN_SAVE=" + std::to_string(save));
      REQUIRE(killed.exit_code == 128 + 9);
      CHECK_FALSE(fs::exists(run + "/checkpoints/best.pt"));
      auto resumed = test::run_gputrain("train --output_dir " + run + " --resume auto");
      INFO(resumed.out << resumed.err);
      REQUIRE(resumed.exit_code == 0);
      for (const char* file : {"epoch-1.pt", "last.pt", "best.pt"})
        CHECK(read_checkpoint_meta(run + "/checkpoints/" + file).step == 16);
      CHECK(fs::exists(run + "/report.html"));
      CHECK(records(run, "summary").size() == 1);
    }
  }
}

namespace {

// Runs `sh -c SCRIPT` (gputrain as $G) in `dir`; returns its exit code.
int shell_in(const test::TempDir& dir, const std::string& script) {
  const std::string cmd = "cd " + dir.path.string() + " && G=" + test::gputrain_exe() + " sh -c '" + script + "'";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("outputs to /dev/stdout: a file, an appended file or a pipe gets the data alone, the report goes to stderr",
          "[run_truth]") {
  test::TempDir dir;
  REQUIRE(test::run_gputrain("train --preset smoke --epochs 1 --output_dir " + (dir / "run")).exit_code == 0);
  const std::string ckpt = "--checkpoint run/checkpoints/last.pt";
  // The reference outputs, written to files.
  REQUIRE(shell_in(dir, "$G infer " + ckpt + " --out ref.csv >/dev/null && $G eval " + ckpt +
                            " --json ref.json >/dev/null && $G export " + ckpt + " --out ref.safetensors >/dev/null") == 0);
  const std::string csv = test::read_file(dir / "ref.csv");
  REQUIRE_THAT(csv, Catch::StartsWith("index,"));

  // infer: stdout a file (>), a file with text in it (>>), a pipe.
  CHECK(shell_in(dir, "$G infer " + ckpt + " --out /dev/stdout > a.csv 2> a.err") == 0);
  CHECK(test::read_file(dir / "a.csv") == csv);
  CHECK_THAT(test::read_file(dir / "a.err"), Catch::Contains("wrote /dev/stdout"));
  test::write_file(dir / "b.csv", "kept\n");
  CHECK(shell_in(dir, "$G infer " + ckpt + " --out /dev/stdout >> b.csv 2>/dev/null") == 0);
  CHECK(test::read_file(dir / "b.csv") == "kept\n" + csv);
  CHECK(shell_in(dir, "$G infer " + ckpt + " --out /dev/stdout 2>/dev/null | cat > c.csv") == 0);
  CHECK(test::read_file(dir / "c.csv") == csv);

  // eval --json: the stream is the JSON alone, equal to the file's.
  CHECK(shell_in(dir, "$G eval " + ckpt + " --json /dev/stdout 2>/dev/null | cat > e.json") == 0);
  CHECK(nlohmann::json::parse(test::read_file(dir / "e.json")) == nlohmann::json::parse(test::read_file(dir / "ref.json")));

  // export and train --export: the bytes are a safetensors file, equal to the file's.
  CHECK(shell_in(dir, "$G export " + ckpt + " --out /dev/stdout 2>/dev/null | cat > x.safetensors") == 0);
  CHECK(test::read_file(dir / "x.safetensors") == test::read_file(dir / "ref.safetensors"));
  CHECK(shell_in(dir, "$G train --preset smoke --epochs 1 --output_dir run2 --export /dev/stdout > t.safetensors "
                      "2> t.err") == 0);
  // benchmark --csv: a stream gets the last report alone (a file is rewritten after each variant).
  CHECK(shell_in(dir, "$G benchmark --preset smoke --variants baseline,all --csv /dev/stdout 2>/dev/null | cat > "
                      "b.csv") == 0);
  const std::string bench = test::read_file(dir / "b.csv");
  CHECK(bench.rfind("variant,", 0) == 0);
  CHECK(std::count(bench.begin(), bench.end(), '\n') == 3);  // the header, baseline, all
  const auto weights = load_safetensors(dir / "t.safetensors");
  CHECK(weights.size() == load_safetensors(dir / "ref.safetensors").size());
  CHECK_THAT(test::read_file(dir / "t.err"), Catch::Contains("configuration") && Catch::Contains("done:"));
}

TEST_CASE("an error in a combined log starts its own line, after the lines printed before it", "[run_truth]") {
  test::TempDir dir;
  // The configuration table is printed, then the batch is found larger than the data.
  CHECK(shell_in(dir, "$G train --preset smoke --synthetic_train_size 8 --batch_size 64 --output_dir run > log 2>&1") == 2);
  const std::string log = test::read_file(dir / "log");
  INFO(log);
  REQUIRE_THAT(log, Catch::Contains("configuration (requested -> resolved)"));
  const auto at = log.find("gputrain: error:");
  REQUIRE(at != std::string::npos);
  CHECK(log[at - 1] == '\n');
  CHECK(log.find("configuration") < at);
}

TEST_CASE("a resume with another --batch_size keeps the run's epochs and finishes its schedule", "[run_truth]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  // 16 steps of 32 per epoch; stopped after step 20 (epoch 2, 128 samples into it).
  auto stopped = test::run_gputrain("train --preset smoke --epochs 4 --log_every 1 --output_dir " + run,
                                    "GPUTRAIN_FAULT_SIGTERM_STEP=20");
  REQUIRE(stopped.exit_code == 143);
  // Batches of 64: 8 steps per epoch, so the position is step 8 + 128 / 64 = 10 of 32.
  auto resumed = test::run_gputrain("train --output_dir " + run + " --resume auto --batch_size 64");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("step 10") && Catch::Contains("32 -> 64 samples per step: step 20 -> 10"));
  const auto evals = records(run, "eval");
  REQUIRE(evals.size() == 4);  // every epoch, none cut short
  CHECK(evals.back()["epoch"] == 3);
  CHECK(evals.back()["step"] == 32);
  const auto steps = records(run, "step");
  CHECK(steps.back()["step"] == 32);
  // The cosine schedule ran to its end: the last step's rate is near 0, not mid-way.
  CHECK(steps.back()["lr"].get<double>() < 0.003 * 0.01);
  const auto config = nlohmann::json::parse(test::read_file(run + "/config.json"));
  REQUIRE(config["history"].size() == 1);
  CHECK(config["history"][0]["steps"]["to"] == 10);
  CHECK(config["history"][0]["flags"]["batch_size"]["from"] == 32);
  CHECK(config["history"][0]["flags"]["batch_size"]["to"] == 64);

  // Accumulation changed mid-epoch: 160 samples in, micro-batches 5..14 make 5 steps of 2, so
  // the position is step 8 - 5 = 3 and the run ends at step 16 of 16 (2 epochs of 8).
  const std::string acc = dir / "acc";
  REQUIRE(test::run_gputrain("train --preset smoke --log_every 1 --output_dir " + acc, "GPUTRAIN_FAULT_SIGTERM_STEP=5")
              .exit_code == 143);
  auto accumulated = test::run_gputrain("train --output_dir " + acc + " --resume auto --accumulation_steps 2");
  INFO(accumulated.out << accumulated.err);
  REQUIRE(accumulated.exit_code == 0);
  CHECK_THAT(accumulated.out, Catch::Contains("32 -> 64 samples per step: step 5 -> 3"));
  CHECK(records(acc, "step").back()["step"] == 16);
  CHECK(status(acc)["total_steps"] == 16);
  CHECK(records(acc, "eval").size() == 2);
}

TEST_CASE("a resume says every flag it changes and keeps them in config.json's history", "[run_truth]") {
  test::TempDir dir;
  const std::string run = dir / "run";
  REQUIRE(test::run_gputrain("train --preset smoke --epochs 2 --log_every 1 --output_dir " + run,
                             "GPUTRAIN_FAULT_SIGTERM_STEP=20")
              .exit_code == 143);
  auto same = test::run_gputrain("train --output_dir " + run + " --resume auto --epochs 2", "GPUTRAIN_FAULT_SIGTERM_STEP=24");
  INFO(same.out << same.err);
  CHECK_THAT(same.out, Catch::Contains("step 20\n"));  // the same value again is no change
  auto changed = test::run_gputrain("train --output_dir " + run + " --resume auto --lr 0.01 --epochs 3");
  INFO(changed.out << changed.err);
  REQUIRE(changed.exit_code == 0);
  CHECK_THAT(changed.out, Catch::Contains("step 24; changed: --epochs 2 -> 3; --lr 0.003 -> 0.01\n"));
  const auto resumes = records(run, "resume");
  REQUIRE(resumes.size() == 2);
  CHECK(resumes.back()["changed"]["flags"]["lr"]["to"] == 0.01);
  const auto config = nlohmann::json::parse(test::read_file(run + "/config.json"));
  REQUIRE(config["history"].size() == 1);
  CHECK(config["history"][0]["step"] == 24);
  CHECK(config["history"][0]["flags"]["epochs"] == nlohmann::json({{"from", 2}, {"to", 3}}));
  CHECK(config["requested"]["lr"] == 0.01);

  // A flag that changes the model or its optimizer cannot load the checkpoint: the refusal names
  // the flag and the way out, not only the file's shapes, and changes nothing.
  const std::string before = test::read_file(run + "/checkpoints/last.pt");
  for (const auto& [flag, said] : std::vector<std::pair<std::string, std::string>>{
           {"--width 16", "this resume changes --width 8 -> 16"}, {"--optimizer sgd", "--optimizer adamw -> sgd"}}) {
    auto refused = test::run_gputrain("train --output_dir " + run + " --resume auto --epochs 3 " + flag);
    INFO(refused.out << refused.err);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains(said) && Catch::Contains("hint: drop the changed flags to continue the run"));
  }
  CHECK(test::read_file(run + "/checkpoints/last.pt") == before);
}

TEST_CASE("a resume on changed data: another sample count is refused, a changed file is said", "[run_truth]") {
  test::TempDir dir;
  const std::string run = dir / "run", csv = dir / "train.csv";
  auto rows = [](int n, int offset) {
    std::string text;
    for (int i = 0; i < n; ++i)
      text += std::to_string((i * 7 + offset) % 10) + "," + std::to_string(i % 5) + "," + std::to_string(i % 2) + "\n";
    return text;
  };
  test::write_file(csv, "a,b,y\n" + rows(200, 0));
  const std::string flags = "train --dataset csv --train_file " + csv +
                            " --target y --model mlp --width 16 --batch_size 20 --epochs 3 --log_every 1 --output_dir " + run;
  REQUIRE(test::run_gputrain(flags, "GPUTRAIN_FAULT_SIGTERM_STEP=12").exit_code == 143);
  const std::string config_before = test::read_file(run + "/config.json");
  const std::string metrics_before = test::read_file(run + "/metrics.jsonl");

  test::write_file(csv, "a,b,y\n" + rows(260, 0));
  auto refused = test::run_gputrain("train --output_dir " + run + " --resume auto");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("the training data has") && Catch::Contains("--allow_data_change"));
  CHECK(test::read_file(run + "/config.json") == config_before);  // refused: nothing changed
  CHECK(test::read_file(run + "/metrics.jsonl") == metrics_before);

  auto allowed = test::run_gputrain("train --output_dir " + run + " --resume auto --allow_data_change",
                                    "GPUTRAIN_FAULT_SIGTERM_STEP=16");
  INFO(allowed.out << allowed.err);
  CHECK(allowed.exit_code == 143);
  CHECK_THAT(allowed.out, Catch::Contains("training samples") && Catch::Contains("(--allow_data_change)"));
  CHECK_THAT(allowed.out, Catch::Contains("data file " + csv + " changed"));
  // The permission is this resume's: the next one compares with the data it went on with.
  const auto config = nlohmann::json::parse(test::read_file(run + "/config.json"));
  CHECK(config["requested"]["allow_data_change"] == false);

  // The same count, other values: said, not refused.
  test::write_file(csv, "a,b,y\n" + rows(260, 3));
  auto edited = test::run_gputrain("train --output_dir " + run + " --resume auto");
  INFO(edited.out << edited.err);
  CHECK(edited.exit_code == 0);
  CHECK_THAT(edited.out, Catch::Contains("data file " + csv + " changed: same size, other bytes"));
  // The larger data has more steps per epoch: the position was counted anew, so the run ends on
  // its one-cycle schedule's last step (a position left behind would end it a few steps early,
  // at several times this rate).
  double top = 0;
  const auto steps = records(run, "step");
  for (const auto& r : steps) top = std::max(top, r["lr"].get<double>());
  CHECK(steps.back()["lr"].get<double>() < 0.01 * top);
}
