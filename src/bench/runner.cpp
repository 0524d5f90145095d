// Runs one benchmark variant: a Session with the variant's switches, the same Trainer::step
// that `train` runs, warm-up untimed, then `repeats` x `steps` timed steps.
#include "bench/runner.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "core/device_cuda.h"
#include "core/error.h"
#include "core/host_info.h"
#include "core/host_memory.h"
#include "core/signals.h"
#include "core/stats.h"
#include "parallel/pipeline.h"
#include "train/fit.h"
#include "train/session.h"
#include "train/state_memory.h"
#include "train/utilization.h"

namespace gputrain {
namespace {

using Clock = std::chrono::steady_clock;

// What a result says before anything runs: all that a skipped variant has.
VariantResult named(const Variant& v) {
  VariantResult r;
  r.name = v.name;
  r.description = v.description;
  r.skipped = v.skipped;
  r.config = v.resolved;
  return r;
}

}  // namespace

VariantResult run_variant(const Variant& v, std::shared_ptr<const DataSplits> data, const BenchSettings& s,
                          const StepCallback& on_step, std::shared_ptr<Comm> comm) {
  VariantResult r = named(v);
  if (!r.skipped.empty()) return r;

  // The same Session as `train` builds: this variant's global switches, the seed, the model.
  SessionOptions options;
  options.data = std::move(data);
  options.search_batch_size = false;
  options.init_weights = true;  // a fine-tuning workload is measured from its weights
  if (comm) {
    options.mesh.ranks = comm->env();
    options.mesh.comm = std::move(comm);
  }
  Session session(v.config, options);
  const Config& c = session.config();
  r.config = c;
  r.session = session.describe_line();
  const Recipe& recipe = session.recipe();
  const int dev = recipe.cuda ? recipe.device.index() : -1;
  Trainer& trainer = session.trainer();
  trainer.set_lr(c.lr);  // constant: the schedule does not change speed
  // --stage compute: 4 steps' batches cycled, so that no loading happens in the timed loop.
  auto batches = session.benchmark_batches(s.stage == "compute" ? 4 : 0);

  std::vector<Batch> micro;
  torch::Tensor loss_sum;
  auto one_step = [&] {
    {
      RECORD_USER_SCOPE("gputrain::data_wait");  // a region of a profile (--explain)
      batches->next(micro);  // endless: always a whole step
    }
    if (s.stage == "data") return;
    auto loss = trainer.step(micro).loss;
    loss_sum = loss_sum.defined() ? loss_sum + loss : loss;
  };

  keep_freed_blocks();  // as train's loop does (core/host_memory.h)
  const int64_t total = s.warmup_steps + s.repeats * s.steps;
  int64_t done = 0;
  auto stopped = [&] { return r.interrupted = stop_signal() != 0; };
  for (int64_t i = 0; i < s.warmup_steps; ++i, ++done) {
    if (stopped()) return r;
    one_step();
    on_step(done + 1, total);
  }
  if (recipe.cuda) {
    cuda_synchronize(dev);
    cuda_reset_peak(dev);
  } else {
    reset_peak_rss();
  }
  session.parallel().take_comm_seconds();  // the warm-up's
  if (Pipeline* p = session.parallel().pipeline()) p->take_totals();

  double wall = 0, wait = 0;
  for (int64_t rep = 0; rep < s.repeats; ++rep) {
    loss_sum = torch::Tensor();
    batches->take_wait_seconds();
    CudaEventTimer gpu_timer;
    std::vector<double> host_marks;
    auto t0 = Clock::now();
    if (recipe.cuda) gpu_timer.mark();
    for (int64_t i = 0; i < s.steps; ++i, ++done) {
      if (stopped()) return r;
      one_step();
      if (recipe.cuda)
        gpu_timer.mark();
      else
        host_marks.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      on_step(done + 1, total);
    }
    if (recipe.cuda) {
      auto ms = gpu_timer.intervals_ms();  // syncs once
      r.step_ms.insert(r.step_ms.end(), ms.begin(), ms.end());
    } else {
      for (size_t i = 0; i < host_marks.size(); ++i) r.step_ms.push_back(host_marks[i] - (i ? host_marks[i - 1] : 0.0));
    }
    wall += std::chrono::duration<double>(Clock::now() - t0).count();
    wait += batches->take_wait_seconds();
  }

  double total_ms = 0;
  for (double m : r.step_ms) total_ms += m;
  const double samples =
      static_cast<double>(c.batch_size * c.accumulation_steps) * static_cast<double>(r.step_ms.size());
  r.samples_per_sec = samples_per_second(samples, total_ms / 1000.0);
  if (!session.parallel().pipeline())
    r.mfu = training_mfu(trainer.model().flops_per_sample, r.samples_per_sec, device_peak_flops(recipe, session.machine()));
  r.median_ms = percentile(r.step_ms, 0.5);
  r.p90_ms = percentile(r.step_ms, 0.9);
  r.data_wait_fraction = wall > 0 ? std::min(1.0, wait / wall) : 0;
  r.peak_memory_bytes = recipe.cuda ? cuda_peak_allocated(dev) : peak_rss_bytes();
  r.comm_ms = r.step_ms.empty() ? 0 : 1000.0 * session.parallel().take_comm_seconds() / static_cast<double>(r.step_ms.size());
  r.optimizer_state_bytes = optimizer_state_bytes(trainer.optimizer());
  r.gradient_bytes = expected_state_memory(trainer.model(), trainer.optimizer(), c.shard != "gradients").gradients;
  if (Pipeline* p = session.parallel().pipeline()) {
    const PipelineStats t = p->take_totals();
    PipelineResult pr;
    pr.stages = static_cast<int64_t>(p->options().stages.size());
    pr.micro_batches = p->options().micro_batches;
    pr.schedule = c.pipeline_schedule;
    pr.bubble = t.bubble();
    pr.theoretical = theoretical_bubble(pr.stages, pr.micro_batches);
    for (double b : t.busy_seconds) pr.busy.push_back(t.seconds > 0 ? b / t.seconds : 0);
    r.pipeline = pr;
  }
  r.loss = loss_sum.defined() ? loss_sum.item<double>() / static_cast<double>(s.steps) : std::nan("");
  if (s.profile_steps > 0) {  // after the timing, which the profiler would slow
    StepProfiler profiler({0, s.profile_steps}, "", dev);
    for (int64_t i = 1; i <= s.profile_steps && !stopped(); ++i) {
      profiler.before_step(i);
      {
        RECORD_USER_SCOPE("gputrain::step");
        one_step();
        if (recipe.cuda) cuda_synchronize(dev);  // the step's kernels end inside its region
      }
      profiler.after_step(i);
    }
    profiler.finish(s.profile_steps);
    r.profile = profiler.ops();
    r.profile_us = profiler.wall_us();
  }
  return r;
}

VariantResult run_to_target(const Variant& v, std::shared_ptr<const DataSplits> data, const FitTarget& target,
                            int64_t seeds, const StepCallback& on_run) {
  VariantResult r = named(v);
  if (!r.skipped.empty()) return r;
  std::vector<TargetRun> runs;
  for (int64_t i = 0; i < seeds; ++i) {
    on_run(i + 1, seeds);
    Config config = v.config;
    config.seed = v.config.seed + i;
    // The Session `train` builds (its data shared), then `train`'s own fit loop: schedule,
    // evaluations, the time limit; no run folder, so nothing is written.
    SessionOptions options;
    options.data = data;
    options.search_batch_size = false;
    options.init_weights = true;
    Session session(config, options);
    check_steps_fit(session);
    if (i == 0) {
      r.config = session.config();
      r.session = session.describe_line();
    }
    CheckpointMeta start{.best_score = -1e300};
    FitResult f;
    std::string stopped;  // why the run ended before its epochs ("" when it ran them)
    try {
      f = fit(session, nullptr, start, session.config_record(), std::chrono::steady_clock::now(), {target});
      stopped = f.stop ? f.stop.text() : f.early_stopped ? "early stopping" : "";
    } catch (const Error& e) {
      if (e.exit_code != kExitNonFinite) throw;
      // A seed that diverged never reaches the target; the race goes on without it.
      stopped = e.what();
    }
    if (stop_signal()) {
      r.interrupted = true;
      return r;
    }
    const int64_t steps_per_epoch = std::max<int64_t>(1, session.steps_per_epoch());
    const double samples = static_cast<double>((f.step - f.first_step) * session.samples_per_step());
    runs.push_back({.seed = config.seed,
                    .reached = f.target_reached,
                    .seconds = f.target_reached ? f.target_train_seconds : f.train_seconds,
                    .eval_seconds = f.eval_seconds,
                    .steps = f.step,
                    .epochs = static_cast<double>(f.step) / static_cast<double>(steps_per_epoch),
                    .metric = f.target_metric,
                    .samples_per_sec = samples_per_second(samples, f.train_seconds),
                    .stopped = stopped});
  }
  r.target = summarize(std::move(runs));
  r.samples_per_sec = r.target->samples_per_sec;
  return r;
}

const VariantResult* fastest(const std::vector<VariantResult>& results) {
  const VariantResult* best = nullptr;
  for (const auto& v : results) {
    if (!v.skipped.empty()) continue;
    if (v.target) {
      if (v.target->reached && (!best || v.target->seconds < best->target->seconds)) best = &v;
    } else if (!v.loss_drift && (!best || v.samples_per_sec > best->samples_per_sec)) {
      best = &v;
    }
  }
  return best;
}

void compare_with_baseline(std::vector<VariantResult>& results) {
  if (results.empty() || !results[0].skipped.empty()) return;
  const VariantResult& base = results[0];
  for (auto& r : results) {
    if (!r.skipped.empty()) continue;
    if (r.target && base.target)
      r.target->speedup = r.target->reached && base.target->reached ? base.target->seconds / r.target->seconds : 0;
    r.speedup = base.samples_per_sec > 0 ? r.samples_per_sec / base.samples_per_sec : 0;
    r.memory_saving = base.peak_memory_bytes > 0
                          ? 1.0 - static_cast<double>(r.peak_memory_bytes) / static_cast<double>(base.peak_memory_bytes)
                          : 0;
    // Same data, same seed, same steps: the loss should agree closely. Mixed precision moves it
    // a little; anything beyond 5% (or 0.02 absolute for small losses) is worth a look.
    if (same_samples_as_baseline(r.name) && std::isfinite(r.loss) && std::isfinite(base.loss))
      r.loss_drift = std::fabs(r.loss - base.loss) > std::max(0.02, 0.05 * std::fabs(base.loss));
  }
}

}  // namespace gputrain
