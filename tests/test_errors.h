// For the bad-input tests: the usage error a call throws (exit code 2, one line), checked.
#pragma once
#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"

namespace gputrain::test {

// Runs `f`, which must throw a usage error of one line; returns its message.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.exit_code == 2);
    CHECK(e.problems.at(0).find('\n') == std::string::npos);
    return e.problems.at(0);
  }
  FAIL("expected a usage error");
  return "";
}

// The same, and the message must name `file`.
template <class F>
std::string error_of(const std::string& file, F&& f) {
  std::string message = error_of(std::forward<F>(f));
  CHECK_THAT(message, Catch::Contains(file));
  return message;
}

}  // namespace gputrain::test
