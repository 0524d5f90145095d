// Progress output: a live bar on a terminal, plain periodic lines otherwise.
#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/text.h"

namespace gputrain {

Progress::Progress(int64_t total_steps, int64_t epochs)
    : total_(total_steps), epochs_(epochs), tty_(isatty(STDOUT_FILENO)), start_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t step, int64_t epoch, double loss, double lr, double samples_per_sec, double step_ms) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double eta = step > 0 ? elapsed * static_cast<double>(total_ - step) / static_cast<double>(step) : 0;
  if (tty_) {
    const int width = 24;
    int filled = total_ > 0 ? static_cast<int>(width * step / total_) : 0;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::printf("\r\033[Kepoch %lld/%lld [%s] %lld/%lld | loss %.4f | %.0f samples/s | ETA %s",
                static_cast<long long>(epoch + 1), static_cast<long long>(epochs_), bar.c_str(),
                static_cast<long long>(step), static_cast<long long>(total_), loss, samples_per_sec,
                format_duration(eta).c_str());
    bar_open_ = true;
  } else {
    std::printf("step %6lld/%lld | epoch %lld | loss %.4f | lr %.2e | %7.1f ms | %8.0f samples/s | ETA %s\n",
                static_cast<long long>(step), static_cast<long long>(total_), static_cast<long long>(epoch + 1), loss,
                lr, step_ms, samples_per_sec, format_duration(eta).c_str());
  }
  std::fflush(stdout);
}

void Progress::line(const std::string& text) {
  if (bar_open_) std::printf("\r\033[K");
  bar_open_ = false;
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

}  // namespace gputrain
