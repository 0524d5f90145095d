// The one place torch's exceptions become gputrain errors, so nothing above it (cli/) needs a
// torch header.
#pragma once
#include <functional>

namespace gputrain {

// Runs `body`; an out-of-memory error becomes a gputrain::Error with a hint, another c10::Error
// one with torch's message (without its C++ backtrace). Exit code 1 for both.
int run_with_torch_errors(const std::function<int()>& body);

}  // namespace gputrain
