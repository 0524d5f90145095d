// Fault injection for tests: the environment read once.
#include "core/faults.h"

#include <csignal>
#include <cstdlib>

namespace gputrain {
namespace {

int64_t read(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : -1;
}

}  // namespace

const Faults& faults() {
  static const Faults f{read("GPUTRAIN_FAULT_NAN_STEP"),     read("GPUTRAIN_FAULT_OOM_STEP"),
                        read("GPUTRAIN_FAULT_OOM_ABOVE"),    read("GPUTRAIN_FAULT_OOM_UPDATE"),
                        read("GPUTRAIN_FAULT_KILL_IN_SAVE"), read("GPUTRAIN_FAULT_NO_FLOCK"),
                        read("GPUTRAIN_FAULT_AMP_CHECK"),    read("GPUTRAIN_FAULT_OVERFLOW_STEP"),
                        read("GPUTRAIN_FAULT_NAN_RANK"),     read("GPUTRAIN_FAULT_SLOW_RANK"),
                        read("GPUTRAIN_FAULT_SIGTERM_STEP"), read("GPUTRAIN_FAULT_KILL_STEP"),
                        read("GPUTRAIN_FAULT_STOP_STEP"),    read("GPUTRAIN_FAULT_STOP_RANK"),
                        read("GPUTRAIN_FAULT_SPIKE_EVERY"),  read("GPUTRAIN_FAULT_OOM_FORWARD")};
  return f;
}

void raise_injected_signal(int64_t step, int rank) {
  const Faults& f = faults();
  if (step == f.sigterm_step) std::raise(SIGTERM);
  if (step == f.kill_step) std::raise(SIGKILL);
  if (step == f.stop_step && rank == f.stop_rank) std::raise(SIGSTOP);
}

}  // namespace gputrain
