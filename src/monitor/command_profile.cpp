// GPUTRAIN_PROFILE: the whole command inside one profiler recording (command_profile.h).
#include "monitor/command_profile.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <ATen/record_function.h>
#include <torch/cuda.h>

#include "core/text.h"
#include "monitor/profiler.h"

namespace gputrain {

int run_profiled_if_asked(const std::function<int()>& command) {
  const char* dir = std::getenv("GPUTRAIN_PROFILE");
  if (dir == nullptr || *dir == '\0') return command();
  std::string out = dir;
  // Every rank of a job has the variable: each writes its own folder.
  const char* rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  if (rank != nullptr && world != nullptr && parse_integer(world).value_or(1) > 1) out += fmt::format("/rank-{}", rank);
  // Device 0's allocator for memory.csv: the command has not chosen its GPU yet (the trace
  // and the allocator's history cover every GPU of the process).
  StepProfiler profiler({0, 1}, out, torch::cuda::is_available() ? 0 : -1, 0, "gputrain::command");
  profiler.before_step(1);
  int code = 0;
  try {
    RECORD_USER_SCOPE("gputrain::command");
    code = command();
  } catch (...) {  // the command's error is the news; what was recorded up to it is still written
    profiler.after_step(1);
    fmt::print(stderr, "{}\n", profiler.finish(1));
    throw;
  }
  profiler.after_step(1);
  fmt::print(stderr, "{}\n", profiler.finish(1));
  return code;
}

}  // namespace gputrain
