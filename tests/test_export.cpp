// Safetensors export: round trips for every dtype, strict rejection of bad files, the CLI, and
// a resnet18 loaded into torchvision's resnet18 from the venv's Python giving the same outputs.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "models/registry.h"
#include "test_errors.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "weights/safetensors.h"
#include "step/optimizer.h"
#include "step/trainer.h"
#include "test_trainer.h"

using namespace gputrain;

namespace {

// A safetensors file assembled by hand: header text as given (unpadded), then `data`.
std::string raw_file(const std::string& header, const std::string& data, uint64_t length_field = 0) {
  uint64_t n = length_field ? length_field : header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

void write_raw(const std::string& path, const torch::Tensor& t) {
  auto c = t.contiguous().to(torch::kFloat);
  std::ofstream(path, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
}

}  // namespace

TEST_CASE("export: safetensors save -> load keeps every tensor, dtype and shape", "[export]") {
  test::TempDir dir;
  torch::manual_seed(0);
  NamedTensors tensors = {
      {"conv.weight", torch::randn({4, 3, 3, 3}).contiguous(torch::MemoryFormat::ChannelsLast)},
      {"f64", torch::randn({5}, torch::kDouble)},
      {"f16", torch::randn({2, 3}).to(torch::kHalf)},
      {"bf16", torch::randn({3, 2}).to(torch::kBFloat16)},
      {"i64", torch::arange(7, torch::kLong)},
      {"i32", torch::arange(-3, 3, torch::kInt)},
      {"i16", torch::arange(4, torch::kShort)},
      {"i8", torch::arange(-2, 2, torch::kChar)},
      {"u8", torch::arange(250, 256, torch::kByte)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(int64_t{12345})},
      {"empty", torch::zeros({0, 3})},
      {"strided", torch::arange(12, torch::kFloat).reshape({3, 4}).t()},  // not contiguous
  };
  save_safetensors(dir / "t.safetensors", tensors, {{"gputrain_model", "test"}});
  CHECK_FALSE(std::filesystem::exists(dir / "t.safetensors.tmp"));
  const std::string bytes = test::read_file(dir / "t.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK((8 + n) % 8 == 0);  // the data buffer starts 8-byte aligned

  Metadata meta;
  auto loaded = load_safetensors(dir / "t.safetensors", &meta);
  CHECK(meta.at("format") == "pt");
  CHECK(meta.at("gputrain_model") == "test");
  REQUIRE(loaded.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    const auto& l = loaded.at(name);
    CHECK(l.scalar_type() == t.scalar_type());
    CHECK(l.sizes() == t.sizes());
    CHECK(l.is_contiguous());
    CHECK(torch::equal(l, t));
  }
}

TEST_CASE("export: model tensors carry torch's names, channels_last weights come out NCHW", "[export]") {
  test::TempDir dir;
  auto model = make_model("resnet18", {{3, 16, 16}, 10, 8});
  to_channels_last(*model);
  save_safetensors(dir / "m.safetensors", model_tensors(*model));
  auto loaded = load_safetensors(dir / "m.safetensors");
  for (const char* name : {"conv1.weight", "bn1.running_mean", "bn1.num_batches_tracked", "layer1.0.conv1.weight",
                           "layer2.0.downsample.0.weight", "layer4.1.bn2.running_var", "fc.weight", "fc.bias"})
    CHECK(loaded.count(name) == 1);
  CHECK(loaded.size() == model->parameters().size() + model->buffers().size());
  CHECK(loaded.at("bn1.num_batches_tracked").scalar_type() == torch::kLong);
  auto w = model->named_parameters()["layer1.0.conv1.weight"];
  REQUIRE_FALSE(w.is_contiguous());  // channels_last in the model
  CHECK(torch::equal(loaded.at("layer1.0.conv1.weight"), w));
}

TEST_CASE("export: bad safetensors files are usage errors naming the file and the fault", "[export]") {
  test::TempDir dir;
  const std::string f = dir / "bad.safetensors";
  const std::string ok_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  auto load = [&](const std::string& bytes) {
    test::write_file(f, bytes);
    return test::error_of(f, [&] { load_safetensors(f); });
  };
  // The hand-made file itself is valid.
  test::write_file(f, raw_file(ok_header, std::string(8, '\0')));
  CHECK(load_safetensors(f).at("a").numel() == 2);

  CHECK_THAT(test::error_of(dir / "missing.safetensors", [&] { load_safetensors(dir / "missing.safetensors"); }),
             Catch::Contains("does not exist"));
  CHECK_THAT(load("abc"), Catch::Contains("shorter than its 8-byte header length"));
  CHECK_THAT(load(raw_file(ok_header, std::string(8, '\0'), 4096)), Catch::Contains("runs past the end"));
  CHECK_THAT(load(raw_file(ok_header, std::string(5, '\0'))), Catch::Contains("outside the 5-byte data buffer"));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","shape":[2],)", std::string(8, '\0'))),
             Catch::Contains("not a JSON object"));
  CHECK_THAT(load(raw_file("[1,2]", "")), Catch::Contains("not a JSON object"));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'))),
             Catch::Contains("unknown dtype \"F17\""));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", std::string(8, '\0'))),
             Catch::Contains("outside"));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'))),
             Catch::Contains("need 12"));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           std::string(12, '\0'))),
             Catch::Contains("overlap"));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0'))),
             Catch::Contains("gap"));
  CHECK_THAT(load(raw_file(ok_header, std::string(12, '\0'))), Catch::Contains("belong to no tensor"));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, '\0'))),
             Catch::Contains("malformed shape"));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                           std::string(8, '\0'))),
             Catch::Contains("impossible shape"));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", "")), Catch::Contains("lacks"));
  CHECK_THAT(load(raw_file(R"({"__metadata__":{"x":1}})", "")), Catch::Contains("not a string"));
  // One name twice: a JSON parser would keep one silently; which tensor is meant is unknown.
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           std::string(8, '\0'))),
             Catch::Contains("duplicate key 'a' in the header"));
  CHECK_THAT(load(raw_file(R"({"a":{"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'))),
             Catch::Contains("duplicate key 'dtype'"));

  // A real export cut short anywhere is refused.
  const std::string good = dir / "good.safetensors";
  save_safetensors(good, {{"w", torch::randn({16, 16})}, {"b", torch::randn({16})}});
  const std::string bytes = test::read_file(good);
  for (size_t keep : {size_t{4}, size_t{20}, bytes.size() / 2, bytes.size() - 1}) {
    INFO(keep);
    load(bytes.substr(0, keep));
  }
}

TEST_CASE("export: an unwritable output path is a usage error naming it", "[export]") {
  test::TempDir dir;
  const std::string out = dir / "no-such-folder/m.safetensors";
  try {  // checked before the work as below; a failure while writing is a write error (exit 1)
    save_safetensors(out, {{"w", torch::ones({2})}});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.exit_code == 1);
    CHECK(e.problems.at(0) == "writing " + out + ": No such file or directory");
  }
  test::error_of(out, [&] { check_writable(out, "export file"); });
  test::error_of(dir.path.string(), [&] { check_writable(dir.path.string(), "export file"); });
}

TEST_CASE("export: train --export and `gputrain export` write the run's final weights", "[export]") {
  test::TempDir dir;
  const std::string run =
      "train --preset smoke --device cpu --model resnet18 --width 8 --dataset synthetic "
      "--input_shape 3x8x8 --epochs 1 --output_dir " +
      (dir / "run");
  auto trained = test::run_gputrain(run + " --export " + (dir / "final.safetensors"));
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  CHECK_THAT(trained.out, Catch::Contains(dir / "final.safetensors"));  // named in the files: line
  auto exported = test::run_gputrain("export --checkpoint " + (dir / "run/checkpoints/last.pt") + " --out " +
                                     (dir / "ckpt.safetensors"));
  REQUIRE(exported.exit_code == 0);
  Metadata meta;
  auto a = load_safetensors(dir / "final.safetensors", &meta);
  auto b = load_safetensors(dir / "ckpt.safetensors");
  CHECK(meta.at("gputrain_model") == "resnet18");
  CHECK(nlohmann::json::parse(meta.at("gputrain_config"))["requested"]["width"] == 8);
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    CHECK(torch::equal(t, b.at(name)));
  }

  // Errors: one line, a hint, exit 2.
  auto missing = test::run_gputrain("export --checkpoint " + (dir / "nope.pt") + " --out " + (dir / "x.safetensors"));
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err,
             Catch::Contains("checkpoint '" + (dir / "nope.pt") + "' does not exist") && Catch::Contains("hint:"));
  const std::string bad_out = dir / "no-such-folder/x.safetensors";
  auto unwritable =
      test::run_gputrain("export --checkpoint " + (dir / "run/checkpoints/last.pt") + " --out " + bad_out);
  CHECK(unwritable.exit_code == 2);
  CHECK_THAT(unwritable.err, Catch::Contains("cannot write export file '" + bad_out + "'") && Catch::Contains("hint:"));
  // train checks the path before training, not after.
  auto train_bad = test::run_gputrain(run + "2 --export " + bad_out);
  CHECK(train_bad.exit_code == 2);
  CHECK_THAT(train_bad.err, Catch::Contains("cannot write export file"));
  CHECK_FALSE(std::filesystem::exists(dir / "run2/checkpoints/last.pt"));
  CHECK(test::run_gputrain("export --out " + (dir / "x.safetensors")).exit_code == 2);
  auto no_ema = test::run_gputrain("export --checkpoint " + (dir / "run/checkpoints/last.pt") + " --out " +
                                   (dir / "x.safetensors") + " --weights ema");
  CHECK(no_ema.exit_code == 2);
  CHECK_THAT(no_ema.err, Catch::Contains("holds no EMA") && Catch::Contains("--weights raw"));
}

TEST_CASE("export: non-finite weights are refused (exit 3) unless asked", "[export]") {
  test::TempDir dir;
  torch::manual_seed(1);
  auto model = make_model("cnn", ModelSpec{{1, 8, 8}, 3, 4});
  Trainer t(model, make_optimizer(optimizer_spec(Config{}), *model), test::keep({}), TrainerOptions{});
  {
    torch::NoGradGuard no_grad;
    t.model().parameters()[0].view(-1)[0] = NAN;
  }
  save_checkpoint(dir / "nan.pt", t, {});  // train never writes such a file; a hand-made one can exist
  const std::string args = "export --checkpoint " + (dir / "nan.pt") + " --out " + (dir / "w.safetensors");
  auto refused = test::run_gputrain(args);
  CHECK(refused.exit_code == 3);
  CHECK_THAT(refused.err, Catch::Contains("non-finite values in 1 tensor(s)") && Catch::Contains("--allow_non_finite"));
  CHECK_FALSE(std::filesystem::exists(dir / "w.safetensors"));
  auto forced = test::run_gputrain(args + " --allow_non_finite");
  INFO(forced.err);
  CHECK(forced.exit_code == 0);
  CHECK(std::filesystem::exists(dir / "w.safetensors"));
}

TEST_CASE("export: --weights picks the EMA average (the default when there is one) or the raw weights", "[export]") {
  test::TempDir dir;
  auto trained = test::run_gputrain("train --preset smoke --epochs 1 --ema_decay 0.9 --output_dir " + (dir / "run") +
                                    " --export " + (dir / "final.safetensors"));
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  const std::string ckpt = dir / "run/checkpoints/last.pt";
  auto export_as = [&](const std::string& which) {
    auto r = test::run_gputrain("export --checkpoint " + ckpt + " --out " + (dir / which) + ".safetensors" +
                                (which == "auto" ? "" : " --weights " + which));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    Metadata meta;
    auto tensors = load_safetensors(dir / which + ".safetensors", &meta);
    return std::make_pair(tensors, meta.at("gputrain_weights"));
  };
  auto final_weights = load_safetensors(dir / "final.safetensors");
  auto [automatic, auto_kind] = export_as("auto");
  auto [ema, ema_kind] = export_as("ema");
  auto [raw, raw_kind] = export_as("raw");
  CHECK(auto_kind == "ema");
  CHECK(ema_kind == "ema");
  CHECK(raw_kind == "raw");
  REQUIRE(raw.size() == ema.size());
  bool differs = false;
  for (const auto& [name, t] : final_weights) {
    INFO(name);
    CHECK(torch::equal(t, automatic.at(name)));  // train --export wrote the average too
    CHECK(torch::equal(t, ema.at(name)));
    differs = differs || !torch::equal(t, raw.at(name));
  }
  CHECK(differs);
  auto bad =
      test::run_gputrain("export --checkpoint " + ckpt + " --out " + (dir / "x.safetensors") + " --weights best");
  CHECK(bad.exit_code == 2);
}

TEST_CASE("export: resnet18 loads into torchvision's resnet18 in Python with the same outputs", "[export]") {
  const std::string root = GPUTRAIN_SOURCE_DIR;
  const std::string python = root + "/.venv/bin/python";
  if (!std::filesystem::exists(python)) {
    WARN("skipped: no venv Python at " + python + " (tools/setup.sh creates it)");
    return;
  }
  // The ImageNet stem is torchvision's resnet18 as it is; the small stem its CIFAR variant.
  for (const std::string stem : {"small", "imagenet"}) {
    test::TempDir dir;
    torch::manual_seed(7);
    const int64_t classes = 10, size = stem == "small" ? 32 : 64;
    ModelSpec spec{{3, size, size}, classes, 0};  // width 64, as torchvision's
    spec.stem = stem;
    auto model = make_model("resnet18", spec);
    {
      // Batch-norm statistics and affine weights like a trained model's (not the 0/1 of a fresh
      // one), so eval mode exercises every buffer while the outputs stay O(1).
      torch::NoGradGuard no_grad;
      for (auto& m : model->modules()) {
        if (auto* bn = m->as<torch::nn::BatchNorm2d>()) {
          bn->running_mean.copy_(torch::randn_like(bn->running_mean) * 0.1);
          bn->running_var.uniform_(0.5, 1.5);
          bn->num_batches_tracked.fill_(100);
          bn->weight.uniform_(0.8, 1.2);
          bn->bias.copy_(torch::randn_like(bn->bias) * 0.1);
        }
      }
    }
    to_channels_last(*model);  // exported as NCHW all the same
    model->eval();
    auto x = torch::randn({4, 3, size, size});
    torch::Tensor y;
    {
      torch::NoGradGuard no_grad;
      y = model->forward(x.contiguous(torch::MemoryFormat::ChannelsLast));
    }
    save_safetensors(dir / "model.safetensors", model_tensors(*model), {{"gputrain_model", "resnet18"}});
    write_raw(dir / "x.f32", x);
    write_raw(dir / "y.f32", y);

    // Once with torchvision (when installed), once with the script's own copy of its resnet18.
    for (const std::string env : {"", "GPUTRAIN_TEST_NO_TORCHVISION=1 "}) {
      const std::string cmd = env + python + " " + root + "/tests/python/test_export.py " +
                              (dir / "model.safetensors") + " " + (dir / "x.f32") + " " + (dir / "y.f32") + " 4 3 " +
                              std::to_string(size) + " " + std::to_string(size) + " " + std::to_string(classes) + " " +
                              stem + " >" + (dir / "log") + " 2>&1";
      int status = std::system(cmd.c_str());
      const std::string log = test::read_file(dir / "log");
      INFO(cmd);
      INFO(log);
      REQUIRE(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
      CHECK_THAT(log, Catch::Contains("max_abs_diff"));
      if (env.empty() && log.find("torchvision absent") != std::string::npos)
        WARN("torchvision is not installed (.pydeps): compared against the script's copy of its resnet18");
    }
  }
}
