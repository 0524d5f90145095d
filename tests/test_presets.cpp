// Presets: every shipped preset is valid; lookup by name and path; the registries agree.
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "config/fields.h"
#include "config/merge.h"
#include "config/presets.h"
#include "core/error.h"
#include "models/registry.h"
#include "test_util.h"

using namespace gputrain;

TEST_CASE("every shipped preset loads, has a description and validates", "[presets]") {
  auto presets = list_presets();
  REQUIRE(presets.size() >= 6);
  for (const auto& p : presets) {
    INFO("preset " << p.name);
    CHECK_FALSE(p.description.empty());
    std::vector<FlagArg> flags = {FlagArg{"preset", p.name, false, "--preset"}};
    // A preset for token shards leaves the files to the user (they are the user's data).
    if (nlohmann::json::parse(test::read_file(p.path)).value("dataset", "") == "tokens")
      flags.push_back(FlagArg{"train_file", std::string("train_*.bin"), false, "--train_file"});
    Config c = resolve_config(flags);
    CHECK(c.preset == p.name);
  }
  std::vector<std::string> names;
  for (const auto& p : presets) names.push_back(p.name);
  for (const char* required : {"quickstart", "smoke", "cpu", "t4", "a100", "h100"})
    CHECK(std::find(names.begin(), names.end(), required) != names.end());
}

TEST_CASE("GPUTRAIN_PRESETS_DIR is searched first", "[presets]") {
  test::TempDir dir;
  test::write_file(dir / "mine.json", R"({"description": "my preset", "epochs": 9})");
  setenv("GPUTRAIN_PRESETS_DIR", dir.path.c_str(), 1);
  Config c = resolve_config({FlagArg{"preset", std::string("mine"), false, "--preset"}});
  unsetenv("GPUTRAIN_PRESETS_DIR");
  CHECK(c.epochs == 9);
}

TEST_CASE("unknown preset names get a suggestion and exit code 2", "[presets]") {
  try {
    find_preset("smok");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.exit_code == 2);
    CHECK_THAT(e.problems[0], Catch::Contains("did you mean 'smoke'"));
  }
}

TEST_CASE("the config's model choices are the model families' names", "[presets]") {
  CHECK(find_field("model")->choices == model_names());
}

TEST_CASE("an unknown --model is exit 2 naming the nearest family and all of them, before any run folder", "[presets][cli]") {
  test::TempDir dir;
  auto r = test::run_gputrain("train --preset smoke --model resnet19 --output_dir " + (dir / "run"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("model 'resnet19' (expected one of: mlp, cnn, resnet18") &&
                        Catch::Contains("(did you mean 'resnet18'?)"));
  CHECK_FALSE(std::filesystem::exists(dir / "run"));
}

namespace {

// Devices as the driver describes them (name, memory, compute capability), one per row of
// choose_device_preset; `kernels` false where the pinned CUDA 13 wheel has none (below sm_75).
GpuInfo gpu(const std::string& name, double gib, int major, int minor, bool kernels = true) {
  GpuInfo g;
  g.name = name;
  g.total_bytes = g.free_bytes = static_cast<int64_t>(gib * (1LL << 30));
  g.major = major;
  g.minor = minor;
  g.bf16 = g.tf32 = major >= 8;
  g.kernels = kernels;
  return g;
}

Config resolve_on(std::vector<GpuInfo> gpus, std::vector<FlagArg> flags) {
  return resolve_config(flags, [gpus] { return gpus; });
}

FlagArg flag(const std::string& name, const std::string& value) { return FlagArg{name, value, false, "--" + name}; }

}  // namespace

TEST_CASE("device presets: each GPU the presets know gets its recipe, others go by capability", "[presets]") {
  struct Row {
    GpuInfo gpu;
    std::string preset;
  };
  const std::vector<Row> rows = {
      {gpu("Tesla T4", 14.6, 7, 5), "t4"},
      {gpu("NVIDIA L4", 22.5, 8, 9), "l4"},
      {gpu("NVIDIA A10G", 22.1, 8, 6), "a10"},
      {gpu("NVIDIA A10", 22.1, 8, 6), "a10"},
      {gpu("NVIDIA GeForce RTX 3090", 23.7, 8, 6), "rtx3090"},
      {gpu("NVIDIA GeForce RTX 4090", 23.6, 8, 9), "rtx3090"},
      {gpu("NVIDIA A100-SXM4-40GB", 39.4, 8, 0), "a100"},
      {gpu("NVIDIA A100 80GB PCIe", 79.2, 8, 0), "a100"},
      {gpu("NVIDIA H100 80GB HBM3", 79.1, 9, 0), "h100"},
      {gpu("NVIDIA H200", 139.8, 9, 0), "h100"},
      {gpu("NVIDIA GH200 480GB", 94.5, 9, 0), "h100"},
      // Not named in any preset: by compute capability and memory.
      {gpu("NVIDIA L40S", 44.4, 8, 9), "a100"},
      {gpu("NVIDIA RTX A4000", 15.7, 8, 6), "l4"},
      {gpu("NVIDIA B200", 178.4, 10, 0), "h100"},
      {gpu("Quadro RTX 8000", 47.5, 7, 5), "t4"},
      // Older than the wheel's kernels: the CPU, and the reason says so.
      {gpu("Tesla P100-PCIE-16GB", 15.9, 6, 0, false), "cpu"},
      {gpu("Tesla V100-SXM2-16GB", 15.8, 7, 0, false), "cpu"},
      // A torch built with sm_60/sm_70 kernels (an older wheel, e.g. Kaggle's): fp16 AMP like a T4.
      {gpu("Tesla P100-PCIE-16GB", 15.9, 6, 0), "t4"},
      {gpu("Tesla V100-SXM2-32GB", 31.7, 7, 0), "t4"},
  };
  for (const auto& row : rows) {
    INFO(row.gpu.name << " sm_" << row.gpu.major << row.gpu.minor << (row.gpu.kernels ? "" : " (no kernels)"));
    const DevicePresetChoice choice = choose_device_preset({row.gpu}, "auto");
    CHECK(choice.name == row.preset);
    CHECK_THAT(choice.why, Catch::Contains(row.gpu.name));
    if (!row.gpu.kernels) CHECK_THAT(choice.why, Catch::Contains("not supported by this LibTorch"));
    // Every chosen name is a shipped device preset.
    Config c = resolve_on({row.gpu}, {});
    CHECK(c.device_preset == row.preset);
    CHECK(c.device_preset_why == choice.why);
  }
  CHECK(choose_device_preset({}, "auto").why == "no CUDA device");
  CHECK(choose_device_preset({gpu("Tesla T4", 14.6, 7, 5)}, "cpu").name == "cpu");
  // cuda:N takes that GPU; auto the first with kernels (a P100 beside a T4 is skipped).
  const std::vector<GpuInfo> mixed = {gpu("Tesla P100-PCIE-16GB", 15.9, 6, 0, false), gpu("NVIDIA L4", 22.5, 8, 9)};
  CHECK(choose_device_preset(mixed, "auto").name == "l4");
  CHECK(choose_device_preset(mixed, "cuda:1").name == "l4");
  CHECK(choose_device_preset(mixed, "cuda:0").name == "cpu");
}

TEST_CASE("device presets: the recipe under the workload under flags, --preset auto, a device preset as --preset", "[presets]") {
  const std::vector<GpuInfo> t4 = {gpu("Tesla T4", 14.6, 7, 5)};
  const std::vector<GpuInfo> a100 = {gpu("NVIDIA A100-SXM4-80GB", 79.2, 8, 0)};

  // The quickstart on an A100: the workload's batch size wins, the recipe brings bf16 and TF32.
  Config q = resolve_on(a100, {flag("amp_dtype", "fp16")});
  CHECK(q.preset == "quickstart");
  CHECK(q.device_preset == "a100");
  CHECK(q.batch_size == 128);
  CHECK(q.amp_dtype == "fp16");  // a flag wins over both
  CHECK(q.tf32);
  CHECK(resolve_on(a100, {}).amp_dtype == "bf16");
  CHECK(resolve_on(t4, {}).amp_dtype == "fp16");
  // A recipe's value where the workload sets none: smoke has no prefetch_factor, the T4 has 4.
  CHECK(resolve_on(t4, {flag("preset", "smoke")}).prefetch_factor == 4);
  CHECK(resolve_on(t4, {flag("preset", "smoke"), flag("device_preset", "none")}).prefetch_factor == 2);
  // --device cpu on a GPU machine: the CPU's recipe.
  CHECK(resolve_on(a100, {flag("device", "cpu")}).device_preset == "cpu");
  // The probe (a CUDA context on every GPU) is asked only for auto, and not for --device cpu.
  const GpuProbe must_not_probe = []() -> std::vector<GpuInfo> {
    FAIL("probed");
    return {};
  };
  CHECK(resolve_config({flag("device_preset", "t4")}, must_not_probe).device_preset == "t4");
  CHECK(resolve_config({flag("device", "cpu")}, must_not_probe).device_preset == "cpu");

  // --preset auto: the default workload under the GPU's recipe.
  Config a = resolve_on(t4, {flag("preset", "auto")});
  CHECK(a.preset == "auto");
  CHECK(a.device_preset == "t4");
  CHECK(a.model == "cnn");
  CHECK(a.batch_size == 128);
  CHECK_THROWS_AS(resolve_on(t4, {flag("preset", "auto"), flag("device_preset", "a100")}), Error);

  // --preset t4: the T4's recipe over the built-in workload, whatever the machine.
  Config t = resolve_on(a100, {flag("preset", "t4")});
  CHECK(t.device_preset == "t4");
  CHECK(t.amp_dtype == "fp16");
  CHECK(t.batch_size == 256);

  // The CPU's recipe named outright trains on the CPU, without asking the GPUs; a flag still wins.
  CHECK(resolve_config({flag("preset", "cpu")}, must_not_probe).device == "cpu");
  CHECK(resolve_config({flag("device_preset", "cpu")}, must_not_probe).device == "cpu");
  CHECK(resolve_on(t4, {flag("device_preset", "cpu"), flag("device", "cuda")}).device == "cuda");
  CHECK(resolve_on({}, {}).device == "auto");  // chosen by auto: the device stays auto

  // A device recipe as --preset with another --device_preset: which one is meant is unclear.
  CHECK_THROWS_AS(resolve_on(t4, {flag("preset", "t4"), flag("device_preset", "a100")}), Error);
  CHECK(resolve_on(t4, {flag("preset", "t4"), flag("device_preset", "t4")}).device_preset == "t4");

  // The device a --config file or the workload sets is the one the recipe is chosen for.
  test::TempDir dir;
  test::write_file(dir / "c.json", R"({"device": "cpu"})");
  Config from_file = resolve_config({flag("config", dir / "c.json")}, must_not_probe);
  CHECK(from_file.device_preset == "cpu");
  CHECK(from_file.device == "cpu");

  // A preset whose "kind" is not a string is a workload, not a crash.
  test::write_file(dir / "odd.json", R"({"kind": 1, "epochs": 2})");
  CHECK(resolve_on({}, {flag("preset", dir / "odd.json")}).epochs == 2);

  // A workload named as the device recipe is refused, listing the recipes.
  try {
    resolve_on(t4, {flag("device_preset", "smoke")});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.exit_code == 2);
    CHECK_THAT(e.problems[0], Catch::Contains("workload preset") && Catch::Contains("t4") && Catch::Contains("none"));
  }
}

TEST_CASE("device presets: a resumed run keeps the recipe it started with", "[presets]") {
  const std::vector<GpuInfo> t4 = {gpu("Tesla T4", 14.6, 7, 5)};
  Config first = resolve_on(t4, {flag("preset", "smoke")});
  nlohmann::json saved = to_json(first);
  CHECK(saved["device_preset"] == "t4");
  // Resumed on an A100, the saved values are the run's: no new recipe on top.
  Config again = resolve_resumed_config(saved, {flag("device_preset", "auto")});
  CHECK(again.device_preset == "t4");
  CHECK(again.amp_dtype == "fp16");
  CHECK(resolve_resumed_config(saved, {flag("device_preset", "t4")}).device_preset == "t4");
  CHECK_THROWS_AS(resolve_resumed_config(saved, {flag("device_preset", "a100")}), Error);
  // A checkpoint from before device presets: its values are its recipe.
  saved.erase("device_preset");
  CHECK(resolve_resumed_config(saved, {}).device_preset == "none");
}
