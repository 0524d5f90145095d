// Presets: every shipped preset is valid; lookup by name and path; the registries agree.
#include <catch2/catch.hpp>

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
    Config c = resolve_config({FlagArg{"preset", p.name, false, "--preset"}});
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

TEST_CASE("the model registry and the config's model choices agree", "[presets]") {
  CHECK(find_field("model")->choices == model_names());
}
