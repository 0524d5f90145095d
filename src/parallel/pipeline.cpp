// Pipeline stages: one thread per stage, tensors handed between them through a mailbox, each
// stage's forwards and backwards in its schedule's order.
#include "parallel/pipeline.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <unordered_map>

#include <ATen/Parallel.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/autograd.h>

#include <fmt/format.h>

#include "core/error.h"
#include "core/device_cuda.h"
#include "core/text.h"
#include "core/autocast.h"

namespace gputrain {

// The bytes a run's allocations hold: live and peak, in all and by the stage that allocated them
// (a tensor one stage makes and the next frees is the first's).
struct MemoryCounts {
  std::mutex mu;
  std::unordered_map<void*, std::pair<int64_t, int>> sizes;  // pointer -> (bytes, stage)
  int64_t live = 0, peak = 0;
  std::vector<int64_t> stage_live, stage_peak;
};

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Thrown in a stage that was waiting when another stage failed; that other error is the one
// run() reports.
struct Aborted : std::exception {
  const char* what() const noexcept override { return "pipeline stage stopped: another stage failed"; }
};

// Installed in each stage thread for a run (the hook ATen's memory profiler uses): the allocators
// report every allocation and free made there.
class MemoryCounter : public c10::MemoryReportingInfoBase {
 public:
  MemoryCounter(std::shared_ptr<MemoryCounts> counts, int stage) : counts_(std::move(counts)), stage_(stage) {}
  void reportMemoryUsage(void* ptr, int64_t size, size_t, size_t, c10::Device) override {
    auto& c = *counts_;
    std::lock_guard<std::mutex> lock(c.mu);
    if (size > 0) {
      // A pointer allocated again whose free was not seen (freed in a thread without the hook):
      // the old block is gone.
      if (auto it = c.sizes.find(ptr); it != c.sizes.end()) {
        c.live -= it->second.first;
        c.stage_live[static_cast<size_t>(it->second.second)] -= it->second.first;
      }
      c.sizes[ptr] = {size, stage_};
      c.live += size;
      c.peak = std::max(c.peak, c.live);
      auto s = static_cast<size_t>(stage_);
      c.stage_peak[s] = std::max(c.stage_peak[s], c.stage_live[s] += size);
    } else if (auto it = c.sizes.find(ptr); it != c.sizes.end()) {  // allocated before the run: not counted
      c.live -= it->second.first;
      c.stage_live[static_cast<size_t>(it->second.second)] -= it->second.first;
      c.sizes.erase(it);
    }
  }
  bool memoryProfilingEnabled() const override { return true; }

 private:
  std::shared_ptr<MemoryCounts> counts_;
  int stage_;
};

// (forward?, micro-batch) in the order stage `s` of `n` runs them.
std::vector<std::pair<bool, int64_t>> schedule_of(PipelineSchedule schedule, int s, int n, int64_t micro) {
  std::vector<std::pair<bool, int64_t>> ops;
  if (schedule == PipelineSchedule::kGpipe) {
    for (int64_t m = 0; m < micro; ++m) ops.push_back({true, m});
    for (int64_t m = 0; m < micro; ++m) ops.push_back({false, m});
    return ops;
  }
  // Backwards in the same ascending order on every stage: the gradients accumulate in the order
  // one device's accumulation would add them.
  const int64_t warmup = std::min<int64_t>(n - s - 1, micro);
  for (int64_t m = 0; m < warmup; ++m) ops.push_back({true, m});
  for (int64_t m = warmup; m < micro; ++m) {
    ops.push_back({true, m});
    ops.push_back({false, m - warmup});
  }
  for (int64_t m = micro - warmup; m < micro; ++m) ops.push_back({false, m});
  return ops;
}

}  // namespace

double PipelineStats::bubble() const {
  if (busy_seconds.empty() || seconds <= 0) return 0;
  double busy = 0;
  for (double b : busy_seconds) busy += b;
  return std::max(0.0, 1.0 - busy / (static_cast<double>(busy_seconds.size()) * seconds));
}

double theoretical_bubble(int64_t stages, int64_t micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

std::vector<Stage> cut_stages(const std::vector<double>& cost, int stages) {
  const size_t n = cost.size(), k = static_cast<size_t>(stages);
  std::vector<double> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  // best[j][i]: the smallest largest-stage cost of pieces [0, i) in j stages; from[j][i]: where
  // the last of those stages begins.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> from(k + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t j = 1; j <= k; ++j)
    for (size_t i = j; i <= n; ++i)
      for (size_t b = j - 1; b < i; ++b) {
        const double c = std::max(best[j - 1][b], prefix[i] - prefix[b]);
        if (c < best[j][i]) {
          best[j][i] = c;
          from[j][i] = b;
        }
      }
  std::vector<Stage> out(k);
  for (size_t j = k, i = n; j > 0; --j) {
    out[j - 1].begin = from[j][i];
    out[j - 1].end = i;
    i = from[j][i];
  }
  return out;
}

namespace {

int64_t piece_parameters(const Piece& p) { return p.parameters; }

}  // namespace

std::vector<Stage> split_model(const Pieces& pieces, const std::string& name, const std::vector<torch::Device>& devices,
                               std::vector<double> costs) {
  const int stages = static_cast<int>(devices.size());
  if (static_cast<int>(pieces.size()) < stages)
    throw usage_error(fmt::format("--pipeline_stages {}: model '{}' splits into at most {} stages", stages, name, pieces.size()),
                      fmt::format("use at most {} stages", pieces.size()));
  if (costs.empty())
    for (const auto& p : pieces) costs.push_back(static_cast<double>(piece_parameters(p)));
  auto out = cut_stages(costs, stages);
  for (size_t s = 0; s < out.size(); ++s) {
    out[s].device = devices[s];
    place_pieces(pieces, out[s].begin, out[s].end, devices[s]);
  }
  return out;
}

std::vector<double> piece_seconds(const Pieces& pieces, const torch::Tensor& x) {
  const int dev = x.is_cuda() ? x.device().index() : -1;
  auto sync = [&] {
    if (dev >= 0) cuda_synchronize(dev);
  };
  constexpr int kRuns = 3;
  std::vector<std::vector<double>> runs(pieces.size());
  for (int run = 0; run <= kRuns; ++run) {  // run 0 warms up
    std::vector<torch::Tensor> outs;
    std::vector<double> forward;
    torch::Tensor h = x;
    for (const auto& p : pieces) {
      torch::Tensor in = h.detach();
      if (&p != &pieces.front() && in.is_floating_point()) in.requires_grad_(true);
      sync();
      const auto t0 = Clock::now();
      outs.push_back(p.run(in));
      sync();
      forward.push_back(since(t0));
      h = outs.back();
    }
    for (size_t i = pieces.size(); i-- > 0;) {
      const auto t0 = Clock::now();
      torch::autograd::backward({outs[i]}, {torch::ones_like(outs[i])});
      sync();
      if (run > 0) runs[i].push_back(forward[i] + since(t0));
    }
  }
  std::vector<double> seconds;
  for (auto& r : runs) {
    std::sort(r.begin(), r.end());
    seconds.push_back(r[r.size() / 2]);
  }
  return seconds;
}

int64_t stage_parameters(const Pieces& pieces, const Stage& stage) {
  int64_t params = 0;
  for (size_t i = stage.begin; i < stage.end; ++i) params += piece_parameters(pieces[i]);
  return params;
}

std::string describe_stages(const Pieces& pieces, const std::vector<Stage>& stages) {
  std::string text;
  for (const auto& s : stages) {
    const int64_t params = stage_parameters(pieces, s);
    const auto& first = pieces[s.begin].name;
    const auto& last = pieces[s.end - 1].name;
    text += fmt::format("{}{} {}{} ({} parameters)", text.empty() ? "" : " | ", s.device.str(), first,
                        s.end - s.begin > 1 ? " .. " + last : "", with_commas(params));
  }
  return text;
}

Pipeline::Pipeline(const Pieces& pieces, PipelineOptions options) : pieces_(pieces), opt_(std::move(options)) {
  for (size_t s = 0; s < opt_.stages.size(); ++s) threads_.emplace_back([this, s] { worker(static_cast<int>(s)); });
}

Pipeline::~Pipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

PipelineStats Pipeline::take_totals() {
  PipelineStats t = std::move(totals_);
  totals_ = {};
  return t;
}

void Pipeline::place() {
  for (const auto& s : opt_.stages) place_pieces(pieces_, s.begin, s.end, s.device);
}

void Pipeline::send(int direction, int from, int64_t micro, torch::Tensor t) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    mail_[{direction, from, micro}] = std::move(t);
  }
  cv_.notify_all();
}

torch::Tensor Pipeline::receive(int direction, int from, int64_t micro) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto key = std::make_tuple(direction, from, micro);
  cv_.wait(lock, [&] { return aborted_ || mail_.count(key) > 0; });
  if (aborted_) throw Aborted();
  auto t = std::move(mail_[key]);
  mail_.erase(key);
  return t;
}

void Pipeline::worker(int stage) {
  // Each stage its own share of the cores (intra-op threads are set per thread).
  at::set_num_threads(std::max(1, opt_.threads_per_stage));
  int64_t seen = 0;
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr error;
    try {
      c10::DebugInfoGuard count(c10::DebugInfoKind::PROFILER_STATE, std::make_shared<MemoryCounter>(job.counts, stage));
      run_stage(stage, job);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error) {
        errors_[static_cast<size_t>(stage)] = error;
        aborted_ = true;
      }
      ++done_;
    }
    cv_.notify_all();
  }
}

void Pipeline::run_stage(int s, const Job& job) {
  const Stage& stage = opt_.stages[static_cast<size_t>(s)];
  const int n = static_cast<int>(opt_.stages.size());
  const bool first = s == 0, last = s == n - 1;
  const auto micro = static_cast<int64_t>(job.xs->size());
  std::vector<torch::Tensor> inputs(static_cast<size_t>(micro)), roots(static_cast<size_t>(micro));
  // On a GPU the host only queues the work: a stage's busy time is what CUDA events around each
  // forward and backward measure on its device's stream (one wait for the last, at the end).
  // The thread makes its stage's GPU current, so the events and new tensors land there.
  const bool gpu = stage.device.is_cuda();
  c10::OptionalDeviceGuard device_guard;
  if (gpu) device_guard.reset_device(stage.device);
  CudaEventTimer gpu_timer;
  double busy = 0;
  auto started = [&] {
    if (gpu) gpu_timer.mark();
    return Clock::now();
  };
  auto finished = [&](Clock::time_point t0) {
    if (gpu)
      gpu_timer.mark();
    else
      busy += since(t0);
  };
  for (const auto& [forward, m] : schedule_of(opt_.schedule, s, n, micro)) {
    const auto i = static_cast<size_t>(m);
    if (forward) {
      // What arrives from the stage before is a detached copy: a leaf whose gradient this stage's
      // backward fills, to be sent back.
      torch::Tensor in = first ? (*job.xs)[i] : receive(0, s - 1, m);
      const auto t0 = started();
      if (!first && in.is_floating_point()) in.requires_grad_(true);
      torch::Tensor out;
      {
        const bool amp = opt_.precision && opt_.precision->amp;
        AutocastGuard autocast(amp, stage.device.type(), amp ? opt_.precision->dtype : torch::kFloat);
        out = run_pieces(pieces_, in, stage.begin, stage.end);
        if (last) out = (*job.loss)(out, (*job.ys)[i]);
      }
      if (last) {
        losses_[i] = out.detach();
        out = (*job.scale)(out);  // backward starts from the scaled loss, outside autocast
      } else {
        send(0, s, m, copy_between_gpus(out.detach(), opt_.stages[static_cast<size_t>(s) + 1].device));
      }
      if (!first) inputs[i] = in;
      roots[i] = out;
      finished(t0);
    } else {
      torch::Tensor grad = last ? torch::Tensor() : receive(1, s + 1, m);
      const auto t0 = started();
      // A first stage whose parameters are all frozen (fine-tuning) has nothing to compute.
      if (!roots[i].requires_grad())
        ;
      else if (last)
        roots[i].backward();
      else
        torch::autograd::backward({roots[i]}, {grad});
      if (!first) {
        auto g = inputs[i].grad();
        if (!g.defined()) g = torch::zeros_like(inputs[i]);
        send(1, s, m, copy_between_gpus(g, opt_.stages[static_cast<size_t>(s) - 1].device));
      }
      roots[i] = inputs[i] = torch::Tensor();  // this micro-batch's activations go now
      finished(t0);
    }
  }
  if (gpu) {
    const std::vector<double> ms = gpu_timer.intervals_ms();  // start-end, end-start, start-end, ...
    for (size_t k = 0; k < ms.size(); k += 2) busy += ms[k] / 1000;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.busy_seconds[static_cast<size_t>(s)] = busy;
}

torch::Tensor Pipeline::run(const torch::Tensor& x, const torch::Tensor& y, const LossFn& loss, const ScaleFn& scale) {
  const auto start = Clock::now();
  std::vector<torch::Tensor> xs = x.chunk(opt_.micro_batches), ys = y.chunk(opt_.micro_batches);
  for (auto& t : xs) t = t.to(opt_.stages.front().device, /*non_blocking=*/true);
  for (auto& t : ys) t = t.to(opt_.stages.back().device, /*non_blocking=*/true);
  auto counts = std::make_shared<MemoryCounts>();
  counts->stage_live.assign(opt_.stages.size(), 0);
  counts->stage_peak.assign(opt_.stages.size(), 0);
  {
    std::unique_lock<std::mutex> lock(mu_);
    mail_.clear();
    losses_.assign(xs.size(), torch::Tensor());
    errors_.assign(opt_.stages.size(), nullptr);
    stats_.busy_seconds.assign(opt_.stages.size(), 0);
    aborted_ = false;
    done_ = 0;
    job_ = {&xs, &ys, &loss, &scale, counts};
    ++generation_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_ == static_cast<int>(opt_.stages.size()); });
    mail_.clear();
  }
  stats_.seconds = since(start);
  stats_.peak_bytes = counts->peak;
  stats_.stage_peak_bytes = counts->stage_peak;
  totals_.seconds += stats_.seconds;
  totals_.busy_seconds.resize(stats_.busy_seconds.size(), 0);
  totals_.stage_peak_bytes.resize(stats_.busy_seconds.size(), 0);
  for (size_t s = 0; s < stats_.busy_seconds.size(); ++s) {
    totals_.busy_seconds[s] += stats_.busy_seconds[s];
    totals_.stage_peak_bytes[s] = std::max(totals_.stage_peak_bytes[s], stats_.stage_peak_bytes[s]);
  }
  totals_.peak_bytes = std::max(totals_.peak_bytes, stats_.peak_bytes);
  // The failure itself, not a stage that stopped because of it.
  std::exception_ptr error;
  for (const auto& e : errors_) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Aborted&) {
      if (!error) error = e;
      continue;
    } catch (...) {
    }
    error = e;
    break;
  }
  if (error) std::rethrow_exception(error);
  torch::Tensor sum;
  for (const auto& l : losses_) sum = sum.defined() ? sum + l : l;
  return sum;
}

}  // namespace gputrain
