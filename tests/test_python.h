// Running tests/python/ scripts with the checkout's venv Python (tools/setup.sh creates it): the
// PyTorch side of the reference checks, and fixtures generated at test time. A file including
// this gets GPUTRAIN_SOURCE_DIR from CMakeLists.txt.
#pragma once
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace gputrain::test {

inline const std::string kRoot = GPUTRAIN_SOURCE_DIR;
// GPUTRAIN_TORCH_PYTHON names another Python with torch: a GPU machine's own (tools/gpu_check.sh),
// where the checkout has no venv.
inline const std::string kPython = std::getenv("GPUTRAIN_TORCH_PYTHON") ? std::getenv("GPUTRAIN_TORCH_PYTHON")
                                                                         : kRoot + "/.venv/bin/python";

// Whether that Python is there; a warning that the test is skipped otherwise.
inline bool have_python() {
  if (std::filesystem::exists(kPython) || kPython.find('/') == std::string::npos) return true;
  WARN("skipped: no Python at " + kPython + " (tools/setup.sh creates the venv; GPUTRAIN_TORCH_PYTHON names another)");
  return false;
}

// Runs a script of tests/python with the venv's Python; its exit code, output in `log`.
inline int python(const std::string& script_and_args, std::string& log) {
  TempDir tmp;
  const std::string cmd = kPython + " " + kRoot + "/tests/python/" + script_and_args + " >" + (tmp / "log") + " 2>&1";
  const int status = std::system(cmd.c_str());
  log = read_file(tmp / "log");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace gputrain::test
