// --model net.pt2: networks defined in Python, exported with torch.export, trained by gputrain's
// graph interpreter. Checked against PyTorch eager (tests/python/imported_check.py): a
// ConvNeXt-style net, a small ViT, a tabular net with embeddings and the quickstart CNN; and
// every kind of bad archive is exit 2 with one line naming the file, before anything is written.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "test_python.h"
#include "test_util.h"

using namespace gputrain;

TEST_CASE("imported: ConvNeXt, ViT, tabular and CNN programs from Python train like PyTorch eager", "[imported][cli]") {
  if (!test::have_python()) return;
  for (const std::string net : {"convnext", "vit", "tabular", "cnn"}) {
    test::TempDir dir;
    std::string log;
    const int code = test::python("imported_check.py " + net + " " + test::gputrain_exe() + " " + dir.path.string(), log);
    INFO(log);
    CHECK(code == 0);
    CHECK_THAT(log, Catch::Contains(net + " (imported): pass"));
  }
}

TEST_CASE("imported: bad archives are exit 2 with one line naming the file, and write nothing", "[imported][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  REQUIRE(test::python("make_pt2_fixtures.py " + dir.path.string(), log) == 0);
  const std::string train = "train --dataset npy --train_file " + (dir / "x.npy") + " --train_targets " + (dir / "y.npy") +
                            " --task regression --loss mse --epochs 1 --batch_size 8 --model ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", "not a zip archive"},
      {"not_zip", "not a zip archive"},
      {"bad_json", "models/model.json: malformed JSON"},
      {"schema9", "export schema version 9.20; gputrain reads version 8.x"},
      {"inference", "a program exported for inference"},
      {"unknown_op", "node 'linear' (torch.ops.aten.no_such_operator.default) from make_pt2_fixtures.py:"},
      {"custom_op", "a custom operator ('mylib' namespace)"},
      {"hop", "node 'relu' (torch.ops.higher_order.cond)"},
      {"shape", "'fc1.weight' holds a tensor of shape [8, 16], the graph reads one of shape [16, 8]"},
      {"too_big", "a Float tensor of shape [16, 800] needs more than the 512 bytes stored for it"},
      {"deflated", "zip compression method 8"},
      {"static_batch", "exported with a fixed batch size of 4"},
      {"two_outputs", "returns several values"},
  };
  for (const auto& [name, why] : cases) {
    INFO(name);
    const std::string file = dir / (name + ".pt2"), run = dir / ("run_" + name);
    auto r = test::run_gputrain(train + file + " --output_dir " + run);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("gputrain: error: " + file + ": ") && Catch::Contains(why));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 2);  // the line and its hint
    CHECK(!std::filesystem::exists(run));
  }
  // The archive they were made from trains.
  auto ok = test::run_gputrain(train + (dir / "good.pt2") + " --output_dir " + (dir / "run_good"));
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("evaluates the training graph in eval mode"));
}

TEST_CASE("imported: --sync_bn, pipeline stages and --grad_checkpointing are refused for a model from a file", "[imported][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  REQUIRE(test::python("make_pt2_fixtures.py " + dir.path.string(), log) == 0);
  const std::string train = "train --dataset npy --train_file " + (dir / "x.npy") + " --train_targets " + (dir / "y.npy") +
                            " --task regression --loss mse --epochs 1 --batch_size 8 --model " + (dir / "good.pt2");
  for (const auto& [flag, why] : std::vector<std::pair<std::string, std::string>>{
           {"--sync_bn", "--sync_bn is for the built-in models"},
           {"--grad_checkpointing", "--grad_checkpointing is for"},
           {"--pipeline_stages 2", "cannot be split into stages"}}) {
    auto r = test::run_gputrain(train + " " + flag + " --output_dir " + (dir / "run"));
    INFO(flag << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(why));
  }
}
