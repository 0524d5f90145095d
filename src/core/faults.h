// Fault injection for tests, in one place: each hook is an environment variable, read once.
// -1 means off. They let tests reach the moments that matter (a NaN loss, an OOM, a kill in
// the middle of a save) on any machine.
#pragma once
#include <cstdint>

namespace gputrain {

struct Faults {
  int64_t nan_step = -1;      // GPUTRAIN_FAULT_NAN_STEP=k: inputs become NaN from optimizer step k on
  int64_t oom_step = -1;      // GPUTRAIN_FAULT_OOM_STEP=k: an out-of-memory error in step k, once
  int64_t oom_above = -1;     // GPUTRAIN_FAULT_OOM_ABOVE=n: probes and step chunks above n samples run out of memory
  int64_t oom_update = -1;    // GPUTRAIN_FAULT_OOM_UPDATE=k: out of memory inside step k's optimizer update
  int64_t kill_in_save = -1;  // GPUTRAIN_FAULT_KILL_IN_SAVE=n: SIGKILL inside the n-th checkpoint save
  int64_t no_flock = -1;      // GPUTRAIN_FAULT_NO_FLOCK=1: act as a file system that refuses flock
  int64_t amp_check = -1;     // GPUTRAIN_FAULT_AMP_CHECK=1: the AMP check's mixed-precision loss is inf
  int64_t overflow_step = -1; // GPUTRAIN_FAULT_OVERFLOW_STEP=k: under the grad scaler, gradients overflow from step k on
  int64_t nan_rank = -1;      // GPUTRAIN_FAULT_NAN_RANK=r: NAN_STEP applies to data-parallel rank r alone
  int64_t slow_rank = -1;     // GPUTRAIN_FAULT_SLOW_RANK=r: rank r's --balance probe steps take 4x as long
  int64_t sigterm_step = -1;  // GPUTRAIN_FAULT_SIGTERM_STEP=k: the process sends itself SIGTERM after step k
  int64_t kill_step = -1;     // GPUTRAIN_FAULT_KILL_STEP=k: the process dies by SIGKILL after step k (a lost node)
  int64_t stop_step = -1;     // GPUTRAIN_FAULT_STOP_STEP=k: data-parallel rank STOP_RANK sends itself SIGSTOP after step k
  int64_t stop_rank = -1;     // GPUTRAIN_FAULT_STOP_RANK=r: (a hung rank)
  int64_t spike_every = -1;   // GPUTRAIN_FAULT_SPIKE_EVERY=k: the inputs of every k-th step x -1000 (a loss spike)
  int64_t oom_forward = -1;   // GPUTRAIN_FAULT_OOM_FORWARD=m: OOM_STEP's error comes in the step's m-th forward (from 1)
};

const Faults& faults();

// The process signals itself after step `step` (counted from 1) where SIGTERM_STEP, KILL_STEP or
// STOP_STEP (on data-parallel rank STOP_RANK) asks for it: real signals, at a known step.
void raise_injected_signal(int64_t step, int rank);

}  // namespace gputrain
