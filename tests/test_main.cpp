// Test runner: Catch2's main, plus an exit code 77 ("skipped" for CTest) when the [cuda] tests
// are asked for on a machine without a GPU, so the skip is visible in the summary.
#define CATCH_CONFIG_RUNNER
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/fields.h"
#include "models/family.h"

namespace gputrain::test {
const char* gputrain_exe() { return GPUTRAIN_EXE; }
}  // namespace gputrain::test

int main(int argc, char** argv) {
  gputrain::set_model_choices(gputrain::model_names());  // as the program does at its start
  // The user's own presets folder holds the recipes measured on this machine, which
  // --device_preset auto prefers: every gputrain the tests start sees an empty one instead
  // (a folder never made), so their recipe is the built-in one. Tests of measured recipes set
  // their own.
  setenv("XDG_CONFIG_HOME", ("/tmp/gputrain-tests-no-config-" + std::to_string(getpid())).c_str(), 1);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "[cuda]" && !torch::cuda::is_available()) {
      std::printf("skipped: the [cuda] tests need a CUDA device, and torch sees none\n");
      return 77;
    }
  }
  return Catch::Session().run(argc, argv);
}
