// GPUTRAIN_PROFILE=DIR: any command (eval, infer, benchmark, a short train) recorded whole by
// the profiler, from its start to its end, into DIR (DIR/rank-N under several ranks). For a
// range of a run's steps, train's --profile is the finer tool.
#pragma once
#include <functional>

namespace gputrain {

// Runs `command` under the profiler when GPUTRAIN_PROFILE names a folder, else just runs it.
int run_profiled_if_asked(const std::function<int()>& command);

}  // namespace gputrain
