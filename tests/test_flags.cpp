// Flags and config merging: both spellings, booleans, precedence, and every error kind at once.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "config/fields.h"
#include "config/merge.h"
#include "core/error.h"
#include "test_util.h"

using namespace gputrain;

namespace {

Config resolve(const std::vector<std::string>& words) {
  Args a = parse_args(words, [](const std::string& n) {
    const Field* f = find_field(n);
    return f && f->is_bool();
  });
  return resolve_config(a.flags);
}

// The problems a bad command line reports (empty when it resolves).
std::vector<std::string> problems_of(const std::vector<std::string>& words) {
  try {
    resolve(words);
  } catch (const Error& e) {
    CHECK(e.exit_code == 2);
    CHECK_FALSE(e.hint.empty());
    return e.problems;
  }
  return {};
}

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("flags accept snake_case and kebab-case, with = or a separate value", "[flags]") {
  CHECK(resolve({"--batch_size", "64"}).batch_size == 64);
  CHECK(resolve({"--batch-size=65"}).batch_size == 65);
  CHECK(resolve({"--lr", "0.25"}).lr == Approx(0.25));
  CHECK(resolve({"--amp-dtype", "bf16"}).amp_dtype == "bf16");
}

TEST_CASE("boolean flags take --x, --x=false, --no-x and --no_x", "[flags]") {
  CHECK(resolve({"--no-use_amp", "--use_amp"}).use_amp == true);
  CHECK(resolve({"--use_amp=false"}).use_amp == false);
  CHECK(resolve({"--no-use_amp"}).use_amp == false);
  CHECK(resolve({"--no_use_amp"}).use_amp == false);
  CHECK(resolve({"--no-use-amp"}).use_amp == false);
  CHECK(resolve({"--use-amp=0"}).use_amp == false);
  // A bare boolean does not swallow the next word.
  Config c = resolve({"--hflip", "--epochs", "2"});
  CHECK(c.hflip);
  CHECK(c.epochs == 2);
}

TEST_CASE("precedence: defaults < preset < --config < flags", "[flags]") {
  test::TempDir dir;
  test::write_file(dir / "p.json", R"({"description": "x", "batch_size": 7, "epochs": 5, "lr": 0.5})");
  test::write_file(dir / "c.json", R"({"epochs": 6, "lr": 0.25})");
  Config c = resolve({"--lr", "0.125", "--preset", dir / "p.json", "--config", dir / "c.json"});
  CHECK(c.batch_size == 7);      // from the preset
  CHECK(c.epochs == 6);          // the config file beats the preset
  CHECK(c.lr == Approx(0.125));  // the flag beats both, wherever it stands

  Config d = resolve({"--preset", dir / "p.json"});
  CHECK(d.epochs == 5);
  CHECK(d.momentum == Config{}.momentum);  // untouched keys keep the built-in default
}

TEST_CASE("the default preset is quickstart", "[flags]") {
  Config c = resolve({});
  CHECK(c.preset == "quickstart");
  CHECK(c.dataset == "fashion-mnist");
  CHECK(c.model == "cnn");
}

TEST_CASE("unknown flags get a did-you-mean", "[flags][errors]") {
  auto p = problems_of({"--batch_sise", "4"});
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::Contains("unknown flag '--batch_sise'"));
  CHECK_THAT(p[0], Catch::Contains("did you mean 'batch_size'"));
}

TEST_CASE("wrong types and out-of-range values are all reported in one go", "[flags][errors]") {
  auto p = problems_of({"--batch_size", "0", "--lr", "-1", "--num_workers", "-2", "--model", "resnet81", "--dataset",
                        "cifar", "--optimizer", "adamm", "--epochs", "two", "--use_amp=maybe", "--bogus"});
  CHECK(any_contains(p, "batch_size '0'"));
  CHECK(any_contains(p, "lr '-1"));
  CHECK(any_contains(p, "num_workers '-2'"));
  CHECK(any_contains(p, "model 'resnet81'"));
  CHECK(any_contains(p, "did you mean 'resnet18'"));
  CHECK(any_contains(p, "dataset 'cifar'"));
  CHECK(any_contains(p, "optimizer 'adamm'"));
  CHECK(any_contains(p, "did you mean 'adam"));
  CHECK(any_contains(p, "--epochs has value 'two' (expected an integer)"));
  CHECK(any_contains(p, "--use_amp has value 'maybe'"));
  CHECK(any_contains(p, "unknown flag '--bogus'"));
  CHECK(p.size() == 9);
}

TEST_CASE("a flag without its value, and --no- on a non-boolean, are errors", "[flags][errors]") {
  auto p = problems_of({"--bogus", "--batch-size", "0", "--lr", "--epochs", "2"});
  CHECK(any_contains(p, "unknown flag '--bogus'"));
  CHECK(any_contains(p, "batch_size '0'"));
  CHECK(any_contains(p, "--lr needs a value"));
  CHECK(p.size() == 3);
  CHECK(any_contains(problems_of({"--lr"}), "--lr needs a value"));
  CHECK(any_contains(problems_of({"--no-lr"}), "--no-lr is not valid"));
  CHECK(any_contains(problems_of({"--no-such"}), "unknown flag '--no-such'"));
  CHECK(any_contains(problems_of({"--device", "gpu"}), "device 'gpu'"));
  CHECK(any_contains(problems_of({"--input_shape", "3x-32"}), "input_shape '3x-32'"));
}

TEST_CASE("JSON files: unknown keys, wrong types, bad syntax, missing files", "[flags][errors]") {
  test::TempDir dir;
  test::write_file(dir / "bad.json", R"({"bach_size": 8, "lr": "fast", "use_amp": 1, "preset": "x"})");
  auto p = problems_of({"--config", dir / "bad.json"});
  CHECK(any_contains(p, "unknown key 'bach_size' (did you mean 'batch_size'?)"));
  CHECK(any_contains(p, "key 'lr' has value \"fast\" (expected a number)"));
  CHECK(any_contains(p, "key 'use_amp' has value 1 (expected true or false)"));
  CHECK(any_contains(p, "key 'preset' only works as a command-line flag"));
  CHECK(p.size() == 4);

  test::write_file(dir / "syntax.json", "{\"lr\": 0.1,,}");
  auto s = problems_of({"--config", dir / "syntax.json"});
  REQUIRE(s.size() == 1);
  CHECK_THAT(s[0], Catch::Contains("is not valid JSON") && Catch::Contains("line 1"));

  CHECK(any_contains(problems_of({"--config", dir / "missing.json"}), "cannot read"));
  CHECK(any_contains(problems_of({"--preset", "quikstart"}), "did you mean 'quickstart'"));
}

TEST_CASE("config JSON round-trips through the field table", "[flags]") {
  Config c = resolve({"--batch_size", "33", "--no-hflip", "--amp_dtype", "fp16"});
  auto j = to_json(c);
  CHECK(j["batch_size"] == 33);
  CHECK(j["amp_dtype"] == "fp16");
  Config back;
  std::vector<std::string> problems;
  j.erase("preset");
  j.erase("config");
  apply_json(back, j, "round-trip", problems);
  CHECK(problems.empty());
  CHECK(to_json(back).dump() == [&] {
    auto k = to_json(c);
    k["preset"] = back.preset;
    k["config"] = back.config;
    return k.dump();
  }());
}
