// Progress output: a live bar on a terminal, plain periodic lines otherwise.
#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "core/text.h"

namespace gputrain {

Progress::Progress(int64_t total_steps, int64_t epochs, bool quiet)
    : total_(total_steps),
      epochs_(epochs),
      tty_(isatty(STDOUT_FILENO)),
      quiet_(quiet),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t step, int64_t epoch, double loss, double lr, double samples_per_sec, double step_ms,
                      const std::string& extra) {
  if (quiet_) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double eta = step > 0 ? elapsed * static_cast<double>(total_ - step) / static_cast<double>(step) : 0;
  if (tty_) {
    const int width = 24;
    int filled = total_ > 0 ? static_cast<int>(width * step / total_) : 0;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    fmt::print("\r\033[Kepoch {}/{} [{}] {}/{} | loss {:.4f} | {:.0f} samples/s | ETA {}{}", epoch + 1, epochs_, bar,
               step, total_, loss, samples_per_sec, format_duration(eta), extra);
    bar_open_ = true;
  } else {
    fmt::print("step {:6}/{} | epoch {} | loss {:.4f} | lr {:.2e} | {:>7.1f} ms | {:>8.0f} samples/s | ETA {}{}\n", step,
               total_, epoch + 1, loss, lr, step_ms, samples_per_sec, format_duration(eta), extra);
  }
  std::fflush(stdout);
}

void Progress::line(const std::string& text) {
  if (quiet_) return;
  if (bar_open_) fmt::print("\r\033[K");
  bar_open_ = false;
  fmt::print("{}\n", text);
  std::fflush(stdout);
}

}  // namespace gputrain
