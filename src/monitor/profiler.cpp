// --profile: Kineto started and stopped around a range of steps, and its events summed into
// self times per operator (profiler.h).
#include "monitor/profiler.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include "core/atomic_file.h"
#include "core/text.h"

namespace gputrain {
namespace {

namespace tap = torch::autograd::profiler;
namespace tpi = torch::profiler::impl;

// Kineto writes lines of its own to stderr when it starts and stops (tracing markers, and
// "gpuGetDeviceCount failed" on a machine without CUDA): they go to /dev/null meanwhile. The
// descriptor is the process's: another thread's line in that moment is lost too, which is why
// the window is kept to the start and the stop.
struct QuietStderr {
  int saved = -1;
  QuietStderr() {
    std::fflush(stderr);
    saved = fcntl(2, F_DUPFD_CLOEXEC, 0);
    if (saved < 0) return;  // without a copy to restore, stderr stays as it is
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, 2);
      close(null);
    }
  }
  ~QuietStderr() {
    std::fflush(stderr);
    if (saved >= 0) {
      dup2(saved, 2);
      close(saved);
    }
  }
};

bool is_region(const std::string& name) { return name.rfind("gputrain::", 0) == 0; }

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// Kineto's activity types: calls on a host thread (operators, gputrain's regions, CUDA runtime
// and driver calls), which nest; work on the GPU (kernels, copies, fills), which runs beside
// them; and the rest (the regions' copies on the GPU timeline, instant events, CUPTI's own
// overhead), which is left out of the sums.
enum class Activity { kHost, kDevice, kOther };
Activity activity_of(uint8_t activity) {
  using A = libkineto::ActivityType;
  switch (static_cast<A>(activity)) {
    case A::CPU_OP:
    case A::USER_ANNOTATION:
    case A::CUDA_RUNTIME:
    case A::CUDA_DRIVER: return Activity::kHost;
    case A::GPU_MEMCPY:
    case A::GPU_MEMSET:
    case A::CONCURRENT_KERNEL: return Activity::kDevice;
    default: return Activity::kOther;
  }
}

std::string ops_csv(const std::vector<ProfiledOp>& ops, double wall_us) {
  std::string csv = "name,kind,calls,self_us,total_us,self_share\n";
  for (const auto& op : ops) {
    std::string name = op.name;
    if (name.find_first_of(",\"\n") != std::string::npos) {  // CSV quoting
      std::string quoted = "\"";
      for (char ch : name) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch == '\n' ? ' ' : ch);
      name = quoted + "\"";
    }
    csv += fmt::format("{},{},{},{:.1f},{:.1f},{:.4f}\n", name, op.device ? "device" : op.region ? "region" : "operator",
                       op.calls, op.self_us, op.total_us, wall_us > 0 ? op.self_us / wall_us : 0.0);
  }
  return csv;
}

}  // namespace

std::vector<ProfiledOp> self_times(std::vector<ProfiledEvent> events) {
  // On each thread, a call's parent is the innermost open call that contains it: sorted by
  // start (the longer first at a tie), a stack of open calls finds it.
  std::sort(events.begin(), events.end(), [](const ProfiledEvent& a, const ProfiledEvent& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.end_ns > b.end_ns;
  });
  std::vector<double> child_ns(events.size(), 0);
  std::vector<size_t> open;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (e.device) continue;  // kernels run beside the host's calls, not inside them
    while (!open.empty() && (events[open.back()].thread != e.thread || events[open.back()].end_ns <= e.start_ns))
      open.pop_back();
    if (!open.empty()) child_ns[open.back()] += static_cast<double>(e.end_ns - e.start_ns);
    open.push_back(i);
  }
  std::map<std::string, ProfiledOp> by_name;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    auto& op = by_name[(e.device ? "device:" : "") + e.name];
    op.name = e.name;
    op.region = e.region;
    op.device = e.device;
    ++op.calls;
    const double total = static_cast<double>(e.end_ns - e.start_ns) / 1000;
    op.total_us += total;
    op.self_us += std::max(0.0, total - child_ns[i] / 1000);
  }
  std::vector<ProfiledOp> out;
  for (auto& [name, op] : by_name) out.push_back(op);
  std::sort(out.begin(), out.end(), [](const ProfiledOp& a, const ProfiledOp& b) { return a.self_us > b.self_us; });
  return out;
}

StepProfiler::StepProfiler(ProfileRange range, std::string dir, bool cuda, int64_t resumed_at)
    : range_(range), dir_(std::move(dir)), cuda_(cuda), resumed_at_(resumed_at) {}

StepProfiler::~StepProfiler() {
  if (recording_) {  // an exception unwound the run: the profiler must not stay on
    recording_ = false;
    QuietStderr quiet;
    try {
      tap::disableProfiler();
    } catch (...) {  // a destructor's best effort: the exception on its way out is the news
    }
  }
}

void StepProfiler::before_step(int64_t step) {
  if (!recording_ && !done_ && step > range_.start && step <= range_.stop) {
    first_ = step;
    start();
  }
}

void StepProfiler::after_step(int64_t step) {
  last_ = std::max(last_, step);
  if (recording_ && step >= range_.stop) stop();
}

void StepProfiler::start() {
  tpi::ProfilerConfig config(tpi::ProfilerState::KINETO, /*report_input_shapes=*/false, /*profile_memory=*/false,
                             /*with_stack=*/false, /*with_flops=*/false, /*with_modules=*/false);
  std::set<tpi::ActivityType> activities{tpi::ActivityType::CPU};
  if (cuda_) activities.insert(tpi::ActivityType::CUDA);
  try {
    QuietStderr quiet;
    tap::prepareProfiler(config, activities);
    tap::enableProfiler(config, activities);
  } catch (const std::exception& e) {
    done_ = true;
    said_ = fmt::format("--profile {}: the profiler did not start ({}); the run goes on unprofiled", range_.text(),
                        first_line(e.what()));
    return;
  }
  recording_ = true;
  began_ = std::chrono::steady_clock::now();
}

void StepProfiler::stop() {
  recording_ = false;  // whatever happens below, the profiler is not stopped twice
  done_ = true;
  std::string file = dir_ + "/trace.json";
  try {
    if (cuda_) torch::cuda::synchronize();  // the recorded steps' kernels end inside the recording
    wall_us_ = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began_).count();
    std::unique_ptr<tap::ProfilerResult> result;
    {
      QuietStderr quiet;
      result = tap::disableProfiler();
    }
    if (!dir_.empty()) {
      std::filesystem::create_directories(dir_);
      // Written beside and renamed: a trace is whole or absent. Kineto reports a failed write
      // in its log rather than by throwing, so the file is checked to end its JSON.
      const std::string tmp = file + ".tmp";
      result->save(tmp);
      std::error_code ec;
      const auto size = std::filesystem::file_size(tmp, ec);
      char last = 0;
      if (FILE* f = ec ? nullptr : std::fopen(tmp.c_str(), "rb")) {
        for (int c; (c = std::fgetc(f)) != EOF;)
          if (!std::isspace(c)) last = static_cast<char>(c);
        std::fclose(f);
      }
      if (ec || size == 0 || last != '}') {
        std::filesystem::remove(tmp, ec);
        throw std::runtime_error("the profiler's trace came out empty or cut short (a full disk?)");
      }
      std::filesystem::rename(tmp, file);
    }
    std::vector<ProfiledEvent> events;
    for (const auto& e : result->events()) {
      const Activity kind = activity_of(e.activityType());
      if (kind == Activity::kOther || e.endNs() < e.startNs()) continue;
      const bool device = kind == Activity::kDevice;
      events.push_back({e.name(), device ? static_cast<uint64_t>(e.deviceResourceId()) : e.startThreadId(), e.startNs(),
                        e.endNs(), is_region(e.name()), device});
    }
    ops_ = self_times(std::move(events));
    const auto& ops = ops_;
    // Shares are of the recorded steps' own wall time (their gputrain::step regions), which
    // leaves out the profiler's start and stop.
    for (const auto& op : ops)
      if (op.name == "gputrain::step" && !op.device && op.total_us > 0) wall_us_ = op.total_us;
    if (dir_.empty()) return;
    file = dir_ + "/ops.csv";
    write_file_atomically(file, ops_csv(ops, wall_us_));
    // The log's table: the regions, then the operators that took the most of the host's time.
    std::string table;
    int shown = 0;
    for (const auto& op : ops)
      if (!op.device && !op.region && shown++ < 8)
        table += fmt::format("\n  {:>10.2f} ms {:>6.1f}% {:>6}  {}", op.self_us / 1000, 100 * op.self_us / wall_us_,
                             op.calls, op.name);
    std::vector<std::string> regions;
    for (const char* name : {"gputrain::data_wait", "gputrain::forward", "gputrain::backward", "gputrain::optimizer"})
      for (const auto& op : ops)
        if (op.name == name) regions.push_back(fmt::format("{} {:.1f}%", op.name.substr(10), 100 * op.total_us / wall_us_));
    said_ = fmt::format(
        "profile: steps {}-{} ({:.1f} ms, slowed by the profiler) -> {}/trace.json, ops.csv\n  steps: {}\n  "
        "self time  share  calls  operator{}",
        first_, last_, wall_us_ / 1000, dir_, join(regions, ", "), table);
  } catch (const std::exception& e) {
    said_ = fmt::format("--profile {}: the profile of steps {}-{} could not be written to {} ({})", range_.text(), first_,
                        last_, file, first_line(e.what()));
  }
}

std::string StepProfiler::finish(int64_t last_step) {
  if (recording_) stop();
  if (!said_.empty() || done_) return said_;
  if (resumed_at_ >= range_.stop)
    return fmt::format("--profile {}: this run resumed at step {}, after the range: nothing was recorded", range_.text(),
                       resumed_at_);
  return fmt::format("--profile {}: the run ended at step {}, before step {}: nothing was recorded", range_.text(),
                     last_step, range_.start + 1);
}

}  // namespace gputrain
