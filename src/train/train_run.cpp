// `gputrain train`: configuration -> Session -> run folder -> fit -> summary.
#include "train/train_run.h"

#include <chrono>

#include <fmt/format.h>

#include "config/config_table.h"
#include "config/merge.h"
#include "core/device_cuda.h"
#include "core/host_info.h"
#include "core/signals.h"
#include "train/export.h"
#include "train/fit.h"
#include "train/run_summary.h"

namespace gputrain {
namespace {

using Clock = std::chrono::steady_clock;

// The configuration to run: the flags over the defaults, or, resuming, over the requested
// configuration of the run being continued (whose decided values the Session may keep).
struct Start {
  Config requested;
  std::string checkpoint;  // "" for a new run
  nlohmann::json pinned;
};

Start read_start(const std::vector<FlagArg>& flags) {
  Start s{resolve_config(flags), "", nullptr};
  if (s.requested.resume.empty()) return s;
  s.checkpoint = resume_checkpoint(s.requested);
  if (s.checkpoint.empty()) {  // one command line serves the first session of a run and every later one
    fmt::print("resume: no checkpoint in {} yet; starting a new run\n", s.requested.output_dir);
  } else {
    StoredConfig saved = read_config_record(nlohmann::json::parse(read_checkpoint_meta(s.checkpoint).config_json));
    s.requested = resolve_resumed_config(saved.requested, flags);
    s.pinned = saved.resolved;
  }
  s.requested.resume.clear();  // a run's record must not point at a checkpoint
  return s;
}

void print_session(const Session& s) {
  print_config_table(s.resolution());
  fmt::print("device report:\n");
  for (const auto& [what, state] : s.recipe().report) fmt::print("  {:<21} {}\n", what, state);
  fmt::print("data: {}\n", s.data().description);
  if (s.requested().auto_batch_size) {
    const std::string why = s.resolution().reason("batch_size");
    if (s.batch_search().is_null())
      fmt::print("{}; keeping --batch_size {}\n", why, s.config().batch_size);
    else
      fmt::print("auto_batch_size: {} ({})\n", s.config().batch_size, why);
  }
  fmt::print("session: {}\n", s.describe_line());
}

void export_weights(Session& s, const std::string& record, int64_t step) {
  Trainer& t = s.trainer();
  if (t.ema()) t.ema()->swap(t.model());  // the average is what a run with EMA deploys
  save_safetensors(s.config().export_path, model_tensors(t.model()),
                   {{"gputrain_model", s.config().model},
                    {"gputrain_config", record},
                    {"gputrain_version", GPUTRAIN_VERSION},
                    {"gputrain_step", std::to_string(step)},
                    {"gputrain_weights", t.ema() ? "ema" : "raw"}});
  if (t.ema()) t.ema()->swap(t.model());
}

}  // namespace

int run_training(const std::vector<FlagArg>& flags) {
  const auto run_start = Clock::now();
  install_stop_handlers();  // first: a signal during set-up stops after the first step
  Start start = read_start(flags);
  if (start.requested.output_dir.empty()) start.requested.output_dir = default_run_dir(start.requested);

  Session s(start.requested, {.pinned = start.pinned});
  print_session(s);
  const Config& c = s.config();
  RunFolder folder(c.output_dir, !start.checkpoint.empty(), c.tensorboard);
  const nlohmann::json record = s.config_record();
  folder.write_config(record);
  if (!c.export_path.empty()) check_writable(c.export_path, "export file");  // now, not after the run
  folder.start(c.monitor_interval, s.recipe().cuda ? s.recipe().device.index() : -1);
  fmt::print("output: {}\nmonitor: {}\n", folder.path(), folder.monitor().status());
  if (!s.batch_search().is_null()) folder.write(s.batch_search());

  // Best evaluation so far: finite (checkpoints hold it) and below any real score.
  CheckpointMeta at{.best_score = -1e300};
  if (!start.checkpoint.empty()) {
    at = load_checkpoint(start.checkpoint, s.trainer());
    fmt::print("resumed from {}: epoch {}, batch {}, step {}\n", start.checkpoint, at.epoch + 1, at.batch, at.step);
    folder.write({{"event", "resume"}, {"step", at.step}, {"epoch", at.epoch}, {"checkpoint", start.checkpoint}});
  }

  FitResult r = fit(s, folder, at, record, run_start);
  if (!r.stop_reason.empty()) return r.stop_reason.rfind("SIG", 0) == 0 ? exit_code_for_signal(stop_signal()) : 0;

  const std::string& monitored = s.monitored();
  RunTotals totals{.step = r.step,
                   .epoch = r.last_epoch,
                   .steps_this_session = r.step - r.first_step,
                   .samples_per_step = c.batch_size * c.accumulation_steps,
                   .skipped_steps = r.skipped_steps,
                   .bad_samples = s.data().train->bad_samples() + s.data().test->bad_samples(),
                   .wall_seconds = std::chrono::duration<double>(Clock::now() - run_start).count(),
                   .train_seconds = r.train_seconds,
                   .wait_seconds = r.wait_seconds};
  const double best = EvalResult::higher_is_better(monitored) ? r.best_score : -r.best_score;
  nlohmann::json summary = summary_record(totals, monitored, best, r.last_eval, r.last_ema_eval);
  if (r.early_stopped) summary["early_stopped"] = true;
  if (s.recipe().cuda)
    summary["peak_memory_bytes"] = cuda_peak_allocated(s.recipe().device.index());
  else
    summary["peak_rss_bytes"] = peak_rss_bytes();
  summary["monitor"] = folder.monitor().finish();
  folder.write(summary);
  print_telemetry(summary["monitor"]);
  folder.write_report();
  if (!c.export_path.empty()) export_weights(s, record.dump(), r.step);
  print_summary(summary, monitored, c, folder.path());
  return 0;
}

}  // namespace gputrain
