// Graceful stops: the handlers only set a flag (all that is safe in a signal handler); the
// training loop finishes its step, writes a checkpoint and exits.
#include "core/signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace gputrain {
namespace {

std::atomic<int> g_signal{0};

void on_signal(int sig) {
  if (sig == SIGINT && g_signal.load() == SIGINT) _exit(130);  // second Ctrl-C: stop now
  g_signal.store(sig);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_signal.load(); }

int exit_code_for_signal(int signal) { return 128 + signal; }

}  // namespace gputrain
