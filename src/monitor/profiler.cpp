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
#include <fmt/ranges.h>
#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include "core/atomic_file.h"
#include "core/device_cuda.h"
#include "core/host_info.h"
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

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch == '\n' ? ' ' : ch);
  return quoted + "\"";
}

std::string ops_csv(const std::vector<ProfiledOp>& ops, double wall_us) {
  std::string csv = "name,kind,calls,self_us,total_us,self_share,input_shapes\n";
  for (const auto& op : ops)
    csv += fmt::format("{},{},{},{:.1f},{:.1f},{:.4f},{}\n", csv_field(op.name),
                       op.device ? "device" : op.region ? "region" : "operator", op.calls, op.self_us, op.total_us,
                       wall_us > 0 ? op.self_us / wall_us : 0.0, csv_field(op.shapes));
  return csv;
}

// [[8, 3], [3]]: an operator's input shapes as Kineto reports them ([] for a scalar or a
// non-tensor argument).
std::string shapes_text(c10::ArrayRef<std::vector<int64_t>> shapes) {
  std::string out = "[";
  for (size_t i = 0; i < shapes.size(); ++i) out += fmt::format("{}[{}]", i ? ", " : "", fmt::join(shapes[i], ", "));
  return out + "]";
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
    auto& op = by_name[(e.device ? "device:" : "") + e.name + "\n" + e.shapes];
    op.name = e.name;
    op.shapes = e.shapes;
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

StepProfiler::StepProfiler(ProfileRange range, std::string dir, int cuda_device, int64_t resumed_at, std::string base)
    : range_(range), dir_(std::move(dir)), cuda_device_(cuda_device), base_(std::move(base)), resumed_at_(resumed_at) {}

std::string StepProfiler::who() const {
  return base_ == "gputrain::step" ? "--profile " + range_.text() : "GPUTRAIN_PROFILE";
}

std::string StepProfiler::steps_text() const {
  return base_ == "gputrain::step" ? fmt::format("steps {}-{}", first_, last_) : "the command";
}

StepProfiler::~StepProfiler() {
  if (recording_) {  // an exception unwound the run: the profiler must not stay on
    recording_ = false;
    QuietStderr quiet;
    try {
      if (memory_history_) cuda_record_memory_history(false);
      tap::disableProfiler();
    } catch (...) {  // a destructor's best effort: the exception on its way out is the news
    }
  }
}

void StepProfiler::before_step(int64_t step) {
  if (!recording_ && !done_ && step > range_.start && step <= range_.stop) {
    first_ = step;
    began_ = std::chrono::steady_clock::now();
    start();
  }
  if (recording_) {
    in_step_ = true;
    note_memory(step, "start");
  }
}

void StepProfiler::after_step(int64_t step) {
  if (!recording_ || !in_step_) return;  // (an epoch's tail ran no step)
  in_step_ = false;
  last_ = std::max(last_, step);
  ++steps_;
  note_memory(step, "end");
  if (step >= range_.stop) stop();
}

double StepProfiler::profiled_seconds() const {
  return recording_ ? std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count() : cost_seconds_;
}

void StepProfiler::note_memory(int64_t step, const char* phase) {
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began_).count();
  std::string allocated;
  if (cuda_device_ >= 0) {
    try {
      allocated = std::to_string(cuda_allocated(cuda_device_));
    } catch (const std::exception&) {  // the allocator not started yet (a whole command's first row)
      allocated = "0";
    }
  }
  memory_rows_ += fmt::format("{},{},{:.3f},{},{}\n", step, phase, ms, rss_bytes(), allocated);
}

void StepProfiler::end_now() {
  if (recording_) stop();
}

void StepProfiler::start() {
  // No profile_memory: the CPU allocator then warns on stderr for each block freed that was
  // allocated before the recording; memory.csv and memory.pickle hold the memory instead.
  tpi::ProfilerConfig config(tpi::ProfilerState::KINETO, /*report_input_shapes=*/range_.shapes,
                             /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/false,
                             /*with_modules=*/false);
  std::set<tpi::ActivityType> activities{tpi::ActivityType::CPU};
  if (cuda_device_ >= 0) activities.insert(tpi::ActivityType::CUDA);
  try {
    QuietStderr quiet;
    tap::prepareProfiler(config, activities);
    tap::enableProfiler(config, activities);
  } catch (const std::exception& e) {
    done_ = true;
    said_ = fmt::format("{}: the profiler did not start ({}); the run goes on unprofiled", who(),
                        first_line(e.what()));
    return;
  }
  recording_ = true;
  if (cuda_device_ >= 0 && !dir_.empty()) {
    try {
      cuda_record_memory_history(true);
      memory_history_ = true;
    } catch (const std::exception&) {  // the trace goes on; save_memory() says there is no pickle
    }
  }
}

std::string StepProfiler::save_memory() {
  write_file_atomically(dir_ + "/memory.csv", "step,phase,ms,rss_bytes,cuda_allocated_bytes\n" + memory_rows_);
  if (cuda_device_ < 0) return "memory.csv";
  if (!memory_history_) return "memory.csv (the GPU allocator's history could not be recorded)";
  std::string pickle;
  try {
    pickle = cuda_memory_snapshot();
    cuda_record_memory_history(false);
  } catch (const std::exception& e) {
    return "memory.csv (no memory.pickle: " + first_line(e.what()) + ")";
  }
  memory_history_ = false;
  write_file_atomically(dir_ + "/memory.pickle", pickle);
  return "memory.csv, memory.pickle";
}

void StepProfiler::stop() {
  recording_ = false;  // whatever happens below, the profiler is not stopped twice
  done_ = true;
  std::string file = dir_ + "/trace.json";
  try {
    if (cuda_device_ >= 0) torch::cuda::synchronize();  // the recorded steps' kernels end inside the recording
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
        std::filesystem::remove(tmp + ".tmp", ec);  // Kineto's own temporary file, left by its failed write
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
                        e.endNs(), is_region(e.name()), device,
                        range_.shapes && e.hasShapes() ? shapes_text(e.shapes()) : std::string()});
    }
    ops_ = self_times(std::move(events));
    const auto& ops = ops_;
    // Shares are of the recorded steps' own wall time (their gputrain::step regions), which
    // leaves out the profiler's start and stop.
    for (const auto& op : ops)
      if (op.name == base_ && !op.device && op.total_us > 0) wall_us_ = op.total_us;
    if (dir_.empty()) {
      cost_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
      return;
    }
    file = dir_ + "/ops.csv";
    write_file_atomically(file, ops_csv(ops, wall_us_));
    file = dir_ + "/memory.csv";
    const std::string memory = save_memory();
    // The log's table: the regions, then the operators that took the most of the host's time.
    std::string table;
    int shown = 0;
    for (const auto& op : ops)
      if (!op.device && !op.region && shown++ < 8)
        table += fmt::format("\n  {:>10.2f} ms {:>6.1f}% {:>6}  {}", op.self_us / 1000, 100 * op.self_us / wall_us_,
                             op.calls, op.name);
    const bool command = base_ != "gputrain::step";
    std::vector<std::string> regions;
    for (const char* name : {"gputrain::data_wait", "gputrain::forward", "gputrain::backward", "gputrain::optimizer"})
      for (const auto& op : ops)
        if (op.name == name) regions.push_back(fmt::format("{} {:.1f}%", op.name.substr(10), 100 * op.total_us / wall_us_));
    said_ = fmt::format(
        "profile: {} ({:.1f} ms, slowed by the profiler{}) -> {}/trace.json, ops.csv, {}{}\n  "
        "self time  share  calls  operator{}",
        steps_text(), wall_us_ / 1000, command ? "" : ": left out of the throughput figures", dir_, memory,
        regions.empty() ? "" : "\n  steps: " + join(regions, ", "), table);
  } catch (const std::exception& e) {
    said_ = fmt::format("{}: the profile of {} could not be written to {} ({})", who(), steps_text(), file,
                        first_line(e.what()));
  }
  if (memory_history_) {  // a failure above left the allocator recording
    memory_history_ = false;
    try {
      cuda_record_memory_history(false);
    } catch (const std::exception&) {  // the failure above is the news
    }
  }
  cost_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
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
