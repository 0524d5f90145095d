// Flags and config merging: both spellings, booleans, precedence, and every error kind at once.
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "config/fields.h"
#include "config/merge.h"
#include "core/error.h"
#include "core/text.h"
#include "test_util.h"

using namespace gputrain;

namespace {

Config resolve(const std::vector<std::string>& words) {
  return resolve_config(parse_command_line(words, {}, true).flags);
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
  CHECK(resolve({"--use_amp=off"}).use_amp == false);
  CHECK(resolve({"--use-amp=no", "--hflip=on"}).hflip == true);
  CHECK(resolve({"--no-hflip", "--hflip=yes"}).hflip == true);
  CHECK(resolve({"--no-hflip=false"}).hflip == true);  // a double negative, as before
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

TEST_CASE("integers are the whole text in decimal: no spaces, signs that are not minus, or overflow", "[flags]") {
  CHECK(parse_integer("12") == 12);
  CHECK(parse_integer("-3") == -3);
  CHECK(parse_integer("9223372036854775807") == INT64_MAX);
  for (const char* bad : {"", " 1", "1 ", "+1", "1.5", "1e3", "0x10", "12a", "9223372036854775808"}) {
    INFO(bad);
    CHECK_FALSE(parse_integer(bad).has_value());
  }
  CHECK_THAT(problems_of({"--epochs", "3x"}).at(0), Catch::Contains("--epochs has value '3x' (expected an integer)"));
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

TEST_CASE("JSON files: deep nesting, a key given twice and numbers that do not fit are exit 2", "[flags][errors]") {
  test::TempDir dir;
  // 100,000 levels once overflowed the stack while the error message printed the value.
  test::write_file(dir / "deep.json", "{\"lr\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  test::write_file(dir / "twice.json", R"({"lr": 0.1, "lr": 0.2})");
  test::write_file(dir / "huge.json", R"({"lr": 1e400})");
  test::write_file(dir / "long_key.json", "{\"" + std::string(1 << 20, 'k') + "\": 1}");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"deep.json", "nests deeper than 32 levels"},
      {"twice.json", "gives key 'lr' twice"},
      {"huge.json", "is not valid JSON: number overflow"},
      {"long_key.json", "unknown key 'kkkk"},
  };
  for (const auto& [file, message] : cases) {
    auto r = test::run_gputrain("train --config " + (dir / file) + " --output_dir " + (dir / "run"));
    INFO(file << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(dir / file) && Catch::Contains(message));
    CHECK_FALSE(std::filesystem::exists(dir / "run"));
  }
}

TEST_CASE("config JSON round-trips through the field table", "[flags]") {
  Config c = resolve({"--batch_size", "33", "--no-hflip", "--amp_dtype", "fp16"});
  auto j = to_json(c);
  CHECK(j["batch_size"] == 33);
  CHECK(j["amp_dtype"] == "fp16");
  Config back;
  std::vector<std::string> problems;
  for (const char* source : {"preset", "config", "device_preset"}) j.erase(source);
  apply_json(back, j, "round-trip", problems);
  CHECK(problems.empty());
  CHECK(to_json(back).dump() == [&] {
    auto k = to_json(c);
    k["preset"] = back.preset;
    k["config"] = back.config;
    k["device_preset"] = back.device_preset;
    return k.dump();
  }());
}

TEST_CASE("the split: raw spellings, order, --no-x, values with one dash", "[flags]") {
  Args a = parse_command_line({"--no-use-amp", "--lr", "-1", "--hflip", "--batch-size=8", "--no_tf32"}, {}, true);
  CHECK(a.positionals.empty());
  REQUIRE(a.flags.size() == 5);
  CHECK(a.flags[0].name == "use_amp");
  CHECK(a.flags[0].negated);
  CHECK_FALSE(a.flags[0].value);
  CHECK(a.flags[0].raw == "--no-use-amp");
  CHECK(a.flags[1].name == "lr");
  CHECK(a.flags[1].value == "-1");
  CHECK(a.flags[1].raw == "--lr");
  CHECK(a.flags[2].name == "hflip");
  CHECK_FALSE(a.flags[2].value);  // bare: no value, not cxxopts's implicit "true"
  CHECK(a.flags[3].name == "batch_size");
  CHECK(a.flags[3].value == "8");
  CHECK(a.flags[3].raw == "--batch-size=8");
  CHECK(a.flags[4].name == "tf32");
  CHECK(a.flags[4].negated);
  CHECK(a.flags[4].raw == "--no_tf32");

  // A bare boolean leaves the next word alone; a value flag before another flag gets no value.
  Args b = parse_command_line({"--hflip", "word", "--lr", "--epochs", "3", "--seed"}, {}, true);
  CHECK(b.positionals == std::vector<std::string>{"word"});
  REQUIRE(b.flags.size() == 4);
  CHECK_FALSE(b.flags[1].value);
  CHECK(b.flags[2].value == "3");
  CHECK(b.flags[3].name == "seed");
  CHECK_FALSE(b.flags[3].value);
}

TEST_CASE("an unknown flag comes back with the word after it as its value", "[flags]") {
  Args a = parse_command_line({"--bogus", "3", "--batch-sise=4", "--no-such", "x", "--epochs", "2"}, {}, true);
  REQUIRE(a.flags.size() == 4);
  CHECK(a.flags[0].name == "bogus");
  CHECK(a.flags[0].value == "3");
  CHECK(a.flags[1].name == "batch_sise");
  CHECK(a.flags[1].value == "4");
  CHECK(a.flags[1].raw == "--batch-sise=4");
  CHECK(a.flags[2].name == "such");  // "--no-x" takes no value, known or not
  CHECK(a.flags[2].negated);
  CHECK(a.flags[3].name == "epochs");
  CHECK(a.positionals == std::vector<std::string>{"x"});

  auto p = problems_of({"--bogus", "3", "--epochs", "2"});
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::Contains("unknown flag '--bogus'"));

  // Without the field table, a field name is just an unknown flag (and keeps its value).
  Args c = parse_command_line({"--lr", "0.1", "--help"}, {}, false);
  REQUIRE(c.flags.size() == 2);
  CHECK(c.flags[0].name == "lr");
  CHECK(c.flags[0].value == "0.1");
  CHECK(c.take_switch("help"));
}

TEST_CASE("command-local flags, and a local flag shadowing a field", "[flags]") {
  // benchmark's --warmup_steps is its own timing warm-up, not the learning-rate warm-up.
  Args a = parse_command_line({"--warmup-steps", "5", "--steps", "7", "--epochs", "2", "--json", "out.json"},
                              {{"warmup_steps", true}, {"steps", true}, {"json", true}}, true);
  CHECK(a.take_value("warmup_steps") == "5");
  CHECK(a.take_value("steps") == "7");
  CHECK(a.take_value("json") == "out.json");
  REQUIRE(a.flags.size() == 1);
  CHECK(resolve_config(a.flags).warmup_steps == Config{}.warmup_steps);
  CHECK(resolve_config(a.flags).epochs == 2);

  // A boolean local shadowing a value field takes no value word.
  Args b = parse_command_line({"--lr", "0.5"}, {{"lr", false}}, true);
  CHECK(b.positionals == std::vector<std::string>{"0.5"});
  CHECK(b.take_switch("lr"));

  // Given twice, the later one counts and none is left over (it would read as unknown).
  Args c = parse_command_line({"--json", "--no-json", "--variants", "all", "--variants", "baseline"},
                              {{"json", false}, {"variants", true}}, false);
  CHECK_FALSE(c.take_switch("json"));
  CHECK(c.take_value("variants") == "baseline");
  CHECK(c.flags.empty());
  Args d = parse_command_line({"--checkpoint"}, {{"checkpoint", true}}, false);
  CHECK(d.take_value("checkpoint") == "");  // given bare: the command says it needs a file
}

TEST_CASE("-h is --help, and -- ends the flags", "[flags]") {
  for (bool fields : {true, false}) {
    Args a = parse_command_line({"-h", "--epochs", "2"}, {}, fields);
    REQUIRE(a.flags.size() == 2);
    CHECK(a.flags[0].name == "help");
    CHECK(a.flags[0].raw == "-h");
    CHECK(a.take_switch("help"));
  }
  CHECK(parse_command_line({"--help=false"}, {}, true).take_switch("help") == false);

  Args b = parse_command_line({"--epochs", "2", "--", "--lr", "x", "-h"}, {}, true);
  REQUIRE(b.flags.size() == 1);
  CHECK(b.flags[0].name == "epochs");
  CHECK(b.positionals == std::vector<std::string>{"--lr", "x", "-h"});
  Args c = parse_command_line({"--lr", "--", "0.1"}, {}, true);
  REQUIRE(c.flags.size() == 1);
  CHECK_FALSE(c.flags[0].value);
  CHECK(c.positionals == std::vector<std::string>{"0.1"});
}

TEST_CASE("an unknown flag, a bad type and an out-of-range value are reported together", "[flags][errors]") {
  auto p = problems_of({"--bogus", "--epochs", "two", "--batch-size", "0", "--no-lr", "--use_amp=maybe"});
  CHECK(any_contains(p, "unknown flag '--bogus'"));
  CHECK(any_contains(p, "--epochs has value 'two' (expected an integer)"));
  CHECK(any_contains(p, "batch_size '0'"));
  CHECK(any_contains(p, "--no-lr is not valid"));
  CHECK(any_contains(p, "--use_amp has value 'maybe'"));
  CHECK(p.size() == 5);
}
