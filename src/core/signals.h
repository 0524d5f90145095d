// Graceful stops: SIGTERM/SIGINT only set a flag that the training loop polls between steps.
#pragma once

namespace gputrain {

// Installs the handlers (also effective as PID 1 in a container, where defaults are ignored).
// A second SIGINT exits at once with 130.
void install_stop_handlers();

// The signal that asked to stop (SIGINT or SIGTERM), or 0.
int stop_signal();

// Exit code for a stop by `signal`: 128 + signal number (130 for SIGINT, 143 for SIGTERM).
int exit_code_for_signal(int signal);

}  // namespace gputrain
