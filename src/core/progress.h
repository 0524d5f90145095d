// Progress output: a live bar on a terminal, plain periodic lines otherwise (logs, CI, pipes).
#pragma once
#include <chrono>
#include <string>

namespace gputrain {

class Progress {
 public:
  // `quiet`: prints nothing (a data-parallel rank other than 0).
  Progress(int64_t total_steps, int64_t epochs, bool quiet = false);
  // Called every log_every steps with numbers already read from the device.
  // `extra` (e.g. the ranks' figures) goes at the end of the line.
  void update(int64_t step, int64_t epoch, double loss, double lr, double samples_per_sec, double step_ms,
              const std::string& extra = "");
  // Prints a full line (ending the bar first when there is one).
  void line(const std::string& text);

 private:
  int64_t total_, epochs_;
  bool tty_;
  bool quiet_;
  bool bar_open_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gputrain
