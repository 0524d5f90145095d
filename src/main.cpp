// gputrain entry point: argv -> command table -> exit code. Errors become messages, not crashes.
#include "cli/commands.h"

#include <cstdlib>

int main(int argc, char** argv) {
  // Kineto (--profile) logs its own warnings, which name no gputrain setting; set before any
  // thread starts, since setenv is not safe beside a getenv on another thread.
  setenv("KINETO_LOG_LEVEL", "5", 0);
  return gputrain::run_cli(argc, argv);
}
