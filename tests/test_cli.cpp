// End to end: the built binary, run as a user would.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sys/stat.h>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace gputrain;
using test::run_gputrain;

using test::read_jsonl;

TEST_CASE("cli: train on the smoke preset writes the run folder and the loss falls", "[cli]") {
  test::TempDir dir;
  auto r = run_gputrain("train --preset smoke --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("configuration (requested -> resolved):") && Catch::Contains("device report:") &&
                        Catch::Contains("cuDNN benchmark") && Catch::Contains("done:"));
  namespace fs = std::filesystem;
  auto run = dir.path / "run";
  CHECK(fs::exists(run / "config.json"));
  CHECK(fs::exists(run / "checkpoints" / "epoch-1.pt"));
  CHECK(fs::exists(run / "checkpoints" / "epoch-2.pt"));
  CHECK(fs::exists(run / "checkpoints" / "last.pt"));
  auto config = nlohmann::json::parse(test::read_file((run / "config.json").string()));
  CHECK(config["requested"]["preset"] == "smoke");
  CHECK(config["resolved"]["batch_size"] == 32);

  auto records = read_jsonl((run / "metrics.jsonl").string());
  std::vector<double> losses;
  int evals = 0;
  for (const auto& rec : records) {
    REQUIRE(rec.contains("event"));
    REQUIRE(rec.contains("step"));
    REQUIRE(rec.contains("epoch"));
    if (rec["event"] == "step") {
      CHECK(rec["samples_per_sec"].get<double>() > 0);
      CHECK(rec["lr"].get<double>() > 0);
      losses.push_back(rec["loss"].get<double>());
    }
    if (rec["event"] == "eval") {
      ++evals;
      CHECK(rec["test_accuracy"].get<double>() >= 0);
      CHECK(rec["test_loss"].get<double>() > 0);
    }
  }
  CHECK(evals == 2);
  REQUIRE(losses.size() >= 4);
  CHECK(losses.back() < 0.7 * losses.front());
  CHECK(records.back()["event"] == "summary");
  CHECK(records.back()["best_test_accuracy"].get<double>() > 0.5);  // 4 classes: chance is 0.25
}

TEST_CASE("cli: the other loop switches run end to end", "[cli]") {
  struct Case {
    std::string flags, expect_out;
  };
  std::vector<Case> cases = {
      {"--amp_dtype bf16", "on (bf16 autocast on cpu)"},
      {"--accumulation_steps 2 --clip_max_norm 0.5 --optimizer sgd --nesterov --lr 0.05 --lr_schedule step",
       "2 micro-batches (effective batch 64)"},
      {"--model resnet18 --width 4 --optimizer adam --warmup_steps 3 --random_crop 2 --hflip", "model resnet18, "},
      {"--model mlp --num_workers 0 --lr_schedule constant --max_steps 5", "n/a for mlp"},
  };
  for (const auto& c : cases) {
    test::TempDir dir;
    auto r = run_gputrain("train --preset smoke --epochs 1 --output_dir " + (dir / "run") + " " + c.flags);
    INFO(c.flags << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains(c.expect_out));
    auto records = read_jsonl(dir / "run/metrics.jsonl");
    CHECK(records.back()["event"] == "summary");
    if (c.flags.find("clip_max_norm") != std::string::npos) CHECK(records.front().contains("grad_norm"));
    if (c.flags.find("max_steps") != std::string::npos) CHECK(records.back()["step"] == 5);
  }
}

TEST_CASE("cli: bad flags exit 2 with every problem and a hint", "[cli]") {
  auto r = run_gputrain("train --batch_sise 4 --lr -1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("gputrain: error: unknown flag '--batch_sise' (did you mean 'batch_size'?)"));
  CHECK_THAT(r.err, Catch::Contains("gputrain: error: lr '-1"));
  CHECK_THAT(r.err, Catch::Contains("hint: "));
  CHECK(r.out.empty());
}

TEST_CASE("cli: a run never overwrites an earlier run's folder", "[cli]") {
  test::TempDir dir;
  REQUIRE(run_gputrain("train --preset smoke --epochs 1 --output_dir " + (dir / "run")).exit_code == 0);
  auto before = test::read_file(dir / "run/metrics.jsonl");
  auto r = run_gputrain("train --preset smoke --epochs 1 --output_dir " + (dir / "run"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("already holds a run"));
  CHECK(test::read_file(dir / "run/metrics.jsonl") == before);
}

// Standard streams the caller broke: `>&-` frees descriptor 1 for the next file opened (the run
// folder's lock took the whole log), a full disk drops the output, and an error written to a
// closed stderr made fmt throw inside the last catch (abort, exit 134).
TEST_CASE("cli: a closed or full standard output or error gives an exit code, never an abort or a log in the run's files", "[cli]") {
  test::TempDir dir;
  auto shell = [&](const std::string& redirections) {
    const std::string cmd = std::string(test::gputrain_exe()) + " " + redirections + " 2>>" + (dir / "err");
    const int status = std::system(("sh -c '" + cmd + "'").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };
  CHECK(shell("train --epochs x 2>&-") == 2);
  CHECK(shell("train --epochs x 2>/dev/full") == 2);
  CHECK(shell("--help >/dev/full") == 1);
  CHECK_THAT(test::read_file(dir / "err"), Catch::Contains("gputrain: error: could not write to standard output: No space left on device"));
  CHECK(shell("train --preset smoke --epochs 1 --output_dir " + (dir / "run") + " >&-") == 1);
  CHECK_THAT(test::read_file(dir / "err"), Catch::Contains("could not write to standard output: it is closed"));
  CHECK(test::read_file(dir / "run/.lock").find("configuration") == std::string::npos);
  CHECK(std::filesystem::exists(dir / "run/checkpoints/last.pt"));
}

// A path given twice (a typo, a tab completion) must not destroy what the command reads or the
// run's own files, and the command must not say it succeeded.
TEST_CASE("cli: an output on an input, on another output or on a run's own file is refused and changes nothing", "[cli]") {
  test::TempDir dir;
  const std::string small = "--preset smoke --synthetic_train_size 128 --synthetic_test_size 32 --epochs 1 --num_workers 0 ";
  REQUIRE(run_gputrain("train " + small + "--output_dir " + (dir / "run")).exit_code == 0);
  const std::string last = dir / "run/checkpoints/last.pt";
  test::write_file(dir / "my.json", R"({"lr": 0.002})");
  std::filesystem::create_symlink(last, dir / "link.pt");
  const auto before = test::read_file(last);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"export --checkpoint " + last + " --out " + (dir / "link.pt"), "--out " + (dir / "link.pt") + " is the file --checkpoint reads"},
      {"infer --checkpoint " + last + " --out " + last, "--out " + last + " is the file --checkpoint reads"},
      {"eval --checkpoint " + last + " --json " + (dir / "run/config.json"), "/run/config.json is the run folder's own config.json"},
      {"export --checkpoint " + last + " --format hf --out " + (dir / "run"), "/run/config.json is the run folder's own config.json"},
      {"train " + small + "--output_dir " + (dir / "run2") + " --export " + (dir / "run2/checkpoints/last.pt"),
       "--export " + (dir / "run2/checkpoints/last.pt") + " is inside the run folder's checkpoints/"},
      {"train " + small + "--resume " + last + " --epochs 2 --output_dir " + (dir / "run3") + " --export " + last,
       "--export " + last + " is the file --resume reads"},
      {"train " + small + "--config " + (dir / "my.json") + " --output_dir " + (dir / "run4") + " --export " + (dir / "my.json"),
       "--export " + (dir / "my.json") + " is the file --config reads"},
      {"benchmark " + small + "--variants baseline --steps 2 --warmup_steps 1 --json " + (dir / "b.json") + " --csv " +
           (dir / "b.json"),
       "--csv " + (dir / "b.json") + " is also --json"},
  };
  for (const auto& [command, message] : cases) {
    auto r = run_gputrain(command);
    INFO(command << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: ") && Catch::Contains(message));
  }
  CHECK(test::read_file(last) == before);
  CHECK(test::read_file(dir / "my.json") == R"({"lr": 0.002})");
  for (const char* absent : {"run2", "run3", "run4", "b.json", "run/model.safetensors"}) CHECK(!std::filesystem::exists(dir / absent));
  // Outputs of their own, and two outputs on one device, are fine.
  CHECK(run_gputrain("export --checkpoint " + last + " --out " + (dir / "run/model.safetensors")).exit_code == 0);
  CHECK(run_gputrain("benchmark " + small + "--variants baseline --steps 2 --warmup_steps 1 --json /dev/null --csv /dev/null")
            .exit_code == 0);
}

TEST_CASE("cli: --config and --preset read files of settings: a folder, an endless device or a huge file is exit 2",
          "[cli]") {
  test::TempDir dir;
  test::write_file(dir / "big.json", std::string(17 << 20, ' '));
  std::filesystem::create_directories(dir / "folder.json");
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--config /dev/zero", "'/dev/zero' holds more than 16777216 bytes: too large for a file of settings"},
           {"--preset /dev/urandom", "'/dev/urandom' holds more than 16777216 bytes"},
           {"--config " + (dir / "folder.json"), "folder.json' is a folder"},
           {"--config " + (dir / "big.json"), "big.json' holds more than 16777216 bytes"}}) {
    auto r = run_gputrain("train " + flags + " --output_dir " + (dir / "run"));
    INFO(flags << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(message));
  }
  CHECK(!std::filesystem::exists(dir / "run"));
  // A pipe is read like a file (--config <(jq ...) in bash).
  auto piped = run_gputrain("train --preset smoke --epochs 1 --max_steps 1 --config /dev/stdin --output_dir " + (dir / "piped"),
                            "printf '{\"lr\": 0.0123}' |");
  INFO(piped.err);
  CHECK(piped.exit_code == 0);
  CHECK(nlohmann::json::parse(test::read_file(dir / "piped/config.json"))["requested"]["lr"] == 0.0123);
}

TEST_CASE("cli: unknown commands get a did-you-mean", "[cli]") {
  auto r = run_gputrain("trian");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown command 'trian' (did you mean 'train'?)"));
}

TEST_CASE("cli: missing data is a clear error with the install hint", "[cli]") {
  test::TempDir dir;
  auto r = run_gputrain("train --data_dir " + (dir / "nothing") + " --output_dir " + (dir / "run"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("dataset 'fashion-mnist' not found"));
  CHECK_THAT(r.err, Catch::Contains("apt-get install dataset-fashion-mnist"));
}

TEST_CASE("cli: --help, --version, info and presets", "[cli]") {
  auto help = run_gputrain("--help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("train") && Catch::Contains("info") && Catch::Contains("presets"));
  auto train_help = run_gputrain("train --help");
  CHECK(train_help.exit_code == 0);
  CHECK_THAT(train_help.out, Catch::Contains("--batch_size") && Catch::Contains("--use_amp"));

  auto version = run_gputrain("--version");
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.out, Catch::Contains("LibTorch") && Catch::Contains("CUDA"));

  auto info = run_gputrain("info --json");
  REQUIRE(info.exit_code == 0);
  auto j = nlohmann::json::parse(info.out);
  for (const char* key : {"libtorch", "cuda_build", "cudnn", "nccl", "gpus", "cpu"}) CHECK(j.contains(key));
  CHECK(j["cpu"]["cores"].get<int>() >= 1);
  auto info_text = run_gputrain("info");
  CHECK_THAT(info_text.out, Catch::Contains("cuDNN") && Catch::Contains("NCCL") && Catch::Contains("CPU"));
  CHECK(run_gputrain("info --jsn").exit_code == 2);

  auto presets = run_gputrain("presets");
  CHECK(presets.exit_code == 0);
  CHECK_THAT(presets.out, Catch::Contains("quickstart") && Catch::Contains("smoke"));
  auto show = run_gputrain("presets show smoke");
  REQUIRE(show.exit_code == 0);
  CHECK(nlohmann::json::parse(show.out)["dataset"] == "synthetic");
  auto missing = run_gputrain("presets show smok");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("did you mean 'smoke'"));
}

TEST_CASE("cli: asking for CUDA without a GPU says so in one line", "[cli]") {
  if (std::system("nvidia-smi >/dev/null 2>&1") == 0) return;  // has a GPU: covered by [cuda]
  auto r = run_gputrain("train --preset smoke --device cuda");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("device 'cuda' is not available"));
}

TEST_CASE("cuda: smoke training with AMP on the GPU", "[cuda]") {
  test::TempDir dir;
  auto r = run_gputrain("train --preset smoke --device cuda --use_amp --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("AMP") && Catch::Contains("on ("));
  auto records = read_jsonl(dir / "run/metrics.jsonl");
  CHECK(records.back()["best_test_accuracy"].get<double>() > 0.5);
  CHECK(records.back()["peak_memory_bytes"].get<double>() > 0);
}

TEST_CASE("cuda: fp16 autocast with the grad scaler trains on the GPU", "[cuda]") {
  test::TempDir dir;
  auto r = run_gputrain("train --preset smoke --device cuda --amp_dtype fp16 --output_dir " + (dir / "run"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("fp16 autocast + grad scaler"));
  auto records = read_jsonl(dir / "run/metrics.jsonl");
  CHECK(records.back()["best_test_accuracy"].get<double>() > 0.5);
}
