// Errors meant for people: what went wrong (one line per problem), a hint, and an exit code.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace gputrain {

// Exit codes: usage, config and input errors are 2; failures while running are 1.
constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 1;
// Training stopped because the loss or the weights stayed non-finite.
constexpr int kExitNonFinite = 3;

struct Error : std::runtime_error {
  Error(std::vector<std::string> problems, std::string hint, int exit_code)
      : std::runtime_error(problems.empty() ? std::string("error") : problems.front()),
        problems(std::move(problems)),
        hint(std::move(hint)),
        exit_code(exit_code) {}
  std::vector<std::string> problems;
  std::string hint;
  int exit_code;
};

inline Error usage_error(std::string problem, std::string hint = "") {
  return Error({std::move(problem)}, std::move(hint), kExitUsage);
}
inline Error runtime_error(std::string problem, std::string hint = "") {
  return Error({std::move(problem)}, std::move(hint), kExitRuntime);
}

}  // namespace gputrain
