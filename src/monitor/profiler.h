// --profile START:STOP: steps START+1 to STOP recorded by LibTorch's Kineto profiler (the
// engine behind torch.profiler). Written to the run's profile/ folder:
//   trace.json     a Chrome trace (Perfetto, chrome://tracing), with gputrain's regions named:
//                  gputrain::step, data_wait, forward, backward, optimizer;
//   ops.csv        every operator and region by self time (its time minus that of the calls
//                  inside it), calls, total time, and its share of the recorded steps' wall time
//                  (the sum of their gputrain::step regions); per input shapes with ":shapes";
//   memory.csv     the process's resident memory (and the GPU allocator's) at each recorded
//                  step's start and end;
//   memory.pickle  on a GPU: the caching allocator's history of the recorded steps, which
//                  PyTorch's memory viewer (pytorch.org/memory_viz) draws.
// The profiler slows the steps it records (a few microseconds per operator): their time is kept
// out of throughput figures (profiled_steps/profiled_seconds).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/profile_range.h"

namespace gputrain {

// One row of ops.csv.
struct ProfiledOp {
  std::string name;
  bool region = false;  // a gputrain:: range, not an operator
  bool device = false;  // a kernel or copy on the GPU (its time runs beside the host's)
  std::string shapes;    // its inputs' shapes, as [[8, 3], []], with ":shapes" (else "")
  int64_t calls = 0;
  double self_us = 0, total_us = 0;
};

class StepProfiler {
 public:
  // `dir` is created when the recording is written ("" writes no file: ops() only);
  // `cuda_device` >= 0 adds that GPU's kernels and memory.
  // `resumed_at`: the step this process starts from (a resume past the range records nothing).
  // `base`: the region whose total is the wall time that shares are of.
  StepProfiler(ProfileRange range, std::string dir, int cuda_device, int64_t resumed_at = 0,
               std::string base = "gputrain::step");
  ~StepProfiler();
  // Around each training step (`step` counted from 1): recording starts before step start+1
  // and ends after step stop, when the files are written.
  void before_step(int64_t step);
  void after_step(int64_t step);
  // The run ended at `last_step`: a recording still open is written. Returns one line for the
  // log: what was written, or why nothing was.
  std::string finish(int64_t last_step);
  // An epoch ends inside the range: the recording stops here, so that it holds no evaluation.
  void end_now();
  bool recording() const { return recording_; }
  // The steps recorded so far, and the seconds from the profiler's start to the end of its
  // stop (the files written): what throughput figures leave out.
  int64_t profiled_steps() const { return steps_ + (in_step_ ? 1 : 0); }  // the one running included
  double profiled_seconds() const;
  // After the recording: every operator and region by self time, and the recorded steps' wall time.
  const std::vector<ProfiledOp>& ops() const { return ops_; }
  double wall_us() const { return wall_us_; }

 private:
  void start();
  void stop();
  void note_memory(int64_t step, const char* phase);
  std::string who() const;         // "--profile 10:15", or "GPUTRAIN_PROFILE" for a whole command
  std::string steps_text() const;  // "steps 11-15", or "the command"
  std::string save_memory();  // memory.csv and memory.pickle; returns what was written
  ProfileRange range_;
  std::string dir_;
  int cuda_device_;
  std::string base_;
  bool recording_ = false, done_ = false, memory_history_ = false;
  int64_t resumed_at_ = 0;
  int64_t first_ = 0, last_ = 0;  // the steps recorded
  std::chrono::steady_clock::time_point began_;
  double wall_us_ = 0, cost_seconds_ = 0;
  int64_t steps_ = 0;
  bool in_step_ = false;  // between before_step and after_step of a recorded step
  std::string memory_rows_;  // memory.csv's rows
  std::string said_;  // finish()'s line, once the files are written (or failed)
  std::vector<ProfiledOp> ops_;
};

// Self times per name from events nested on each thread (exposed for tests).
struct ProfiledEvent {
  std::string name;
  uint64_t thread = 0, start_ns = 0, end_ns = 0;
  bool region = false, device = false;
  std::string shapes;  // kept apart from the same operator's other shapes
};
std::vector<ProfiledOp> self_times(std::vector<ProfiledEvent> events);

}  // namespace gputrain
