// A whole training run: data -> model -> Trainer::step loop -> eval each epoch -> checkpoints,
// metrics.jsonl and a final summary.
#include "train/train_run.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "config/config_table.h"
#include "core/device.h"
#include "core/device_cuda.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/signals.h"
#include "core/text.h"
#include "data/make_dataset.h"
#include "monitor/metrics.h"
#include "monitor/report_html.h"
#include "monitor/sampler.h"
#include "monitor/tensorboard.h"
#include "train/auto_batch.h"
#include "train/build.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/export.h"
#include "train/lr_schedule.h"
#include "train/optim.h"
#include "train/run_summary.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string default_output_dir(const Config& c) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  std::string preset = fs::path(c.preset).stem().string();
  return "runs/" + std::string(stamp) + "-" + preset;
}

// The report is a convenience: failing to write it must not fail a finished run.
void write_report_safely(const std::string& out_dir) {
  try {
    write_html_report(out_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gputrain: warning: report.html not written (%s); `gputrain report %s` retries\n", e.what(),
                 out_dir.c_str());
  }
}

void print_report(const RunContext& ctx) {
  std::printf("device report:\n");
  for (const auto& [what, state] : ctx.report) std::printf("  %-21s %s\n", what.c_str(), state.c_str());
}

}  // namespace

int run_training(Config c) {
  const auto run_start = Clock::now();
  install_stop_handlers();  // first: a signal during set-up stops after the first step
  print_config(c);
  check_model_options(c);  // before the data is read
  RunContext ctx = make_run_context(c);
  print_report(ctx);

  DataSplits data = make_datasets(c);
  std::printf("data: %s\n", data.description.c_str());
  const std::string monitored = check_task_options(c, *data.train);  // what "best" means for this task
  // Statistics computed from the data go into the run's config.json: a resume reuses them.
  c.normalize_mean = data.normalize_mean;
  c.normalize_std = data.normalize_std;

  if (ctx.cuda) cuda_reset_peak(ctx.device.index());  // the summary's peak is this run's
  std::unique_ptr<Trainer> trainer_ptr = build_trainer(c, ctx, *data.train);
  Trainer& trainer = *trainer_ptr;
  std::printf("model: %s, %s parameters\n", c.model.c_str(), std::to_string(parameter_count(trainer.model())).c_str());
  nlohmann::json batch_search;
  if (c.auto_batch_size) {
    if (!ctx.cuda && !std::getenv("GPUTRAIN_FAULT_OOM_ABOVE")) {
      std::printf("auto_batch_size: n/a on cpu (no device memory limit); keeping --batch_size %lld\n",
                  static_cast<long long>(c.batch_size));
    } else {
      auto found = find_batch_size(trainer, data.train->sample_shape(), data.train->num_classes(),
                                   data.train->target_numel(), c.batch_size, data.train->size() / c.accumulation_steps);
      std::printf("auto_batch_size: %lld (largest that fit: %lld, minus a 10%% margin; %zu probes)\n",
                  static_cast<long long>(found.batch_size), static_cast<long long>(found.largest_fit),
                  found.trials.size());
      batch_search = {{"event", "auto_batch_size"},
                      {"step", 0},
                      {"epoch", 0},
                      {"batch_size", found.batch_size},
                      {"largest_fit", found.largest_fit},
                      {"trials", found.trials}};
      c.batch_size = found.batch_size;
    }
    c.auto_batch_size = false;  // the run's batch size is now fixed: a resume must not search again
  }

  LoaderOptions train_opts = train_loader_options(c, ctx);
  LoaderOptions test_opts = train_opts;
  test_opts.batch_size = c.eval_batch_size;
  test_opts.shuffle = test_opts.drop_last = false;
  Loader train_loader(data.train, train_opts);
  Loader test_loader(data.test, test_opts);
  const int64_t micro_per_epoch = train_loader.num_batches();
  const int64_t steps_per_epoch = micro_per_epoch / c.accumulation_steps;
  if (steps_per_epoch == 0)
    throw usage_error("batch_size " + std::to_string(c.batch_size) + " x accumulation_steps " +
                          std::to_string(c.accumulation_steps) + " is more than the " +
                          std::to_string(data.train->size()) + " training samples",
                      "lower --batch_size or --accumulation_steps");
  int64_t total_steps = steps_per_epoch * c.epochs;
  if (c.max_steps > 0) total_steps = std::min(total_steps, c.max_steps);

  LrSchedule schedule{c.lr_schedule,   c.lr,           c.min_lr,  c.warmup_steps, total_steps,
                      steps_per_epoch, c.lr_step_size, c.lr_gamma};

  // --- run folder
  std::string out_dir = c.output_dir.empty() ? default_output_dir(c) : c.output_dir;
  const auto ckpt_dir = fs::path(out_dir) / "checkpoints";
  if (c.resume.empty() && fs::exists(fs::path(out_dir) / "metrics.jsonl"))  // never mix or overwrite runs
    throw usage_error("output_dir '" + out_dir + "' already holds a run (metrics.jsonl)",
                      "pass a new --output_dir, remove that folder, or continue it with --resume auto");
  std::error_code ec;
  fs::create_directories(ckpt_dir, ec);
  if (ec) throw usage_error("cannot create output_dir '" + out_dir + "' (" + ec.message() + ")");
  for (const auto& entry : fs::directory_iterator(ckpt_dir))
    if (entry.path().extension() == ".tmp") fs::remove(entry.path());  // torn writes of a crash
  // The step and eval records again, for TensorBoard; made before metrics.jsonl so that a folder
  // it cannot create (a usage error) leaves no half-started run behind.
  std::unique_ptr<TensorBoardWriter> tensorboard;
  if (c.tensorboard) tensorboard = std::make_unique<TensorBoardWriter>((fs::path(out_dir) / "tensorboard").string());
  nlohmann::json config_json = to_json(c);
  config_json["output_dir"] = out_dir;
  config_json["resume"] = "";  // a resumed run's configuration must not point at a checkpoint
  std::ofstream(fs::path(out_dir) / "config.json") << config_json.dump(2) << "\n";
  MetricsWriter metrics((fs::path(out_dir) / "metrics.jsonl").string());
  if (!c.export_path.empty()) check_writable(c.export_path, "export file");  // now, not after the run
  std::printf("output: %s\n", out_dir.c_str());
  if (!batch_search.is_null()) metrics.write(batch_search);
  Monitor monitor((fs::path(out_dir) / "monitor.csv").string(), c.monitor_interval, ctx.cuda ? ctx.device.index() : -1);
  std::printf("monitor: %s\n", monitor.status().c_str());

  // --- resume
  int64_t step = 0, first_epoch = 0, first_batch = 0;
  // Best evaluation so far (accuracy, or -loss for regression); finite so checkpoints can hold it.
  double best_score = -1e300;
  int64_t evals_since_best = 0;  // for --early_stopping
  bool early_stopped = false;
  if (!c.resume.empty()) {
    CheckpointMeta meta = load_checkpoint(c.resume, trainer);
    step = meta.step;
    first_epoch = meta.epoch;
    first_batch = meta.batch;
    best_score = meta.best_score;
    evals_since_best = meta.evals_since_best;
    // A run that stopped early stays stopped: resuming it only writes the summary again.
    early_stopped = c.early_stopping > 0 && evals_since_best >= c.early_stopping;
    std::printf("resumed from %s: epoch %lld, batch %lld, step %lld\n", c.resume.c_str(),
                static_cast<long long>(first_epoch + 1), static_cast<long long>(first_batch),
                static_cast<long long>(step));
    metrics.write({{"event", "resume"}, {"step", step}, {"epoch", first_epoch}, {"checkpoint", c.resume}});
  }

  const int64_t first_step = step;  // steps before this session (for throughput and timing)

  // --- stop conditions: signals, the time limit, a loss that stays non-finite
  const double time_limit = c.time_limit.empty() ? 0 : parse_duration(c.time_limit);
  double last_save_seconds = 1, last_eval_seconds = 0;
  // Why the run must stop now ("" when it need not): a signal, or the time limit coming within
  // `reserve` seconds (what runs before the next check) plus a save and a little slack.
  auto stop_now = [&](double reserve) -> std::string {
    if (stop_signal()) return stop_signal() == SIGTERM ? "SIGTERM" : "SIGINT";
    if (time_limit > 0 && seconds_since(run_start) + reserve + 3 * last_save_seconds + 2 >= time_limit)
      return "time limit " + c.time_limit;
    return "";
  };
  auto eval_must_stop = [&] { return !stop_now(0).empty(); };  // polled between evaluation batches
  // Test hook: from this optimizer step on, inputs become NaN (exercises the bad-loss stop).
  const char* fault_env = std::getenv("GPUTRAIN_FAULT_NAN_STEP");
  const int64_t fault_nan_step = fault_env ? std::atoll(fault_env) : -1;
  auto device_long = torch::TensorOptions().dtype(torch::kLong).device(ctx.device);
  torch::Tensor bad_run = torch::zeros({}, device_long), worst_bad_run = torch::zeros({}, device_long);

  auto checkpoint_meta = [&](int64_t epoch, int64_t batch) {
    return CheckpointMeta{epoch, batch, step, best_score, config_json.dump(), evals_since_best};
  };
  // Saves unless a weight went non-finite: a checkpoint must always be safe to resume from.
  auto save = [&](const std::string& name, const CheckpointMeta& meta) {
    if (!c.save_checkpoints && name != "last.pt") return;
    if (!all_finite(trainer))
      throw Error({"weights or optimizer state not finite at step " + std::to_string(step) + "; no checkpoint written"},
                  "the last checkpoint in " + ckpt_dir.string() + " is intact", kExitNonFinite);
    auto t0 = Clock::now();
    save_checkpoint((ckpt_dir / name).string(), trainer, meta);
    last_save_seconds = seconds_since(t0);
  };
  auto check_bad_steps = [&] {
    int64_t worst = worst_bad_run.item<int64_t>();
    if (worst >= c.max_bad_steps)
      throw Error({"the loss was not finite for " + std::to_string(worst) + " consecutive steps (by step " +
                   std::to_string(step) + ")"},
                  "lower --lr, set --clip_max_norm, or try --amp_dtype bf16; checkpoints written before "
                  "are intact",
                  kExitNonFinite);
  };

  // --- loop
  Progress progress(total_steps, c.epochs);
  const int64_t samples_per_step = c.batch_size * c.accumulation_steps;
  int64_t skipped = 0, last_epoch = first_epoch;
  double train_seconds = 0, wait_seconds = 0, last_lr = c.lr;
  EvalResult last_eval, last_ema_eval;
  torch::Tensor loss_sum;
  int64_t window_steps = 0;
  auto window_start = Clock::now();
  std::vector<Batch> micro;
  micro.reserve(static_cast<size_t>(c.accumulation_steps));
  std::string stop_reason;

  // A run stopped during the evaluation after its last step resumes to run that evaluation.
  auto has_work = [&](int64_t epoch) { return step < total_steps || (epoch == first_epoch && first_batch > 0); };
  for (int64_t epoch = first_epoch; epoch < c.epochs && has_work(epoch) && !early_stopped; ++epoch) {
    const auto epoch_start = Clock::now();
    last_epoch = epoch;
    int64_t consumed = epoch == first_epoch ? first_batch : 0;  // micro-batches taken this epoch
    train_loader.start_epoch(epoch, consumed);
    while (step < total_steps) {
      micro.clear();
      while (static_cast<int64_t>(micro.size()) < c.accumulation_steps) {
        auto host = train_loader.next();
        if (!host) break;
        micro.push_back(std::move(*host));
      }
      if (static_cast<int64_t>(micro.size()) < c.accumulation_steps) break;  // epoch tail
      consumed += c.accumulation_steps;
      if (fault_nan_step >= 0 && step >= fault_nan_step) micro[0].x = micro[0].x * std::nan("");

      last_lr = schedule.at(step);
      set_lr(trainer.optimizer(), last_lr);
      const int64_t split_before = trainer.split();
      StepResult r = trainer.step(micro);
      if (trainer.split() != split_before)
        metrics.write({{"event", "oom"},
                       {"step", step + 1},
                       {"epoch", epoch},
                       {"micro_batch", c.batch_size / trainer.split()},
                       {"accumulation", c.accumulation_steps * trainer.split()},
                       {"effective_batch", samples_per_step}});
      skipped += r.stepped ? 0 : 1;
      // Consecutive non-finite losses, counted on the device (no sync): read at log time.
      bad_run = torch::where(torch::isfinite(r.loss), torch::zeros_like(bad_run), bad_run + 1);
      worst_bad_run = torch::maximum(worst_bad_run, bad_run);
      loss_sum = loss_sum.defined() ? loss_sum + r.loss : r.loss;
      ++step;
      ++window_steps;

      if (step % c.log_every == 0 || step == total_steps) {
        // The only host sync of the hot loop: reading the loss to print it.
        double loss = loss_sum.item<double>() / static_cast<double>(window_steps);
        double secs = seconds_since(window_start);
        double sps = static_cast<double>(window_steps * samples_per_step) / secs;
        double wait = train_loader.take_wait_seconds();
        wait_seconds += wait;
        progress.update(step, epoch, loss, last_lr, sps, 1000.0 * secs / static_cast<double>(window_steps));
        nlohmann::json rec = {{"event", "step"},
                              {"step", step},
                              {"epoch", epoch},
                              {"loss", loss},
                              {"lr", last_lr},
                              {"samples_per_sec", sps},
                              {"step_ms", 1000.0 * secs / static_cast<double>(window_steps)},
                              {"data_wait_fraction", secs > 0 ? wait / secs : 0.0}};
        if (r.grad_norm.defined()) rec["grad_norm"] = r.grad_norm.item<double>();
        if (ctx.grad_scaler) rec["loss_scale"] = trainer.scaler().get_scale();
        if (skipped) rec["skipped_steps"] = skipped;
        metrics.write(rec);
        if (tensorboard) tensorboard->write(rec);
        loss_sum = torch::Tensor();
        window_steps = 0;
        window_start = Clock::now();
        check_bad_steps();
      }

      // Stop between steps: on a signal, or when the next step, a save and an evaluation
      // might not fit before the time limit.
      double step_seconds = seconds_since(run_start) / static_cast<double>(std::max<int64_t>(1, step - first_step));
      stop_reason = stop_now(2 * step_seconds + last_eval_seconds);
      if (!stop_reason.empty()) break;
    }
    wait_seconds += train_loader.take_wait_seconds();
    train_seconds += seconds_since(epoch_start);
    // Stopped inside an epoch: save the position in it. At its very end, finish it normally
    // (evaluation and epoch checkpoint) and stop after.
    const bool epoch_done = consumed + c.accumulation_steps > micro_per_epoch || step >= total_steps;
    if (!stop_reason.empty() && !epoch_done) {
      check_bad_steps();
      save("last.pt", checkpoint_meta(epoch, consumed));
      break;
    }

    check_bad_steps();
    auto eval_start = Clock::now();
    last_eval = evaluate(trainer, test_loader, eval_must_stop);
    if (trainer.ema() &&
        !last_eval.interrupted) {  // the average is what one deploys: it decides "best" and early stopping
      trainer.ema()->swap(trainer.model());
      last_ema_eval = evaluate(trainer, test_loader, eval_must_stop);
      trainer.ema()->swap(trainer.model());
    }
    if (last_eval.interrupted || last_ema_eval.interrupted) {
      // A signal or the deadline during the evaluation: the epoch's steps are saved, its
      // evaluation runs on resume.
      last_eval = last_ema_eval = EvalResult{};
      stop_reason = stop_now(0);
      save("last.pt", checkpoint_meta(epoch, consumed));
      break;
    }
    last_eval_seconds = seconds_since(eval_start);
    const EvalResult& judged = trainer.ema() ? last_ema_eval : last_eval;
    // Scores are signed so that higher is better, whatever the metric.
    const double score = judged.metric(monitored) * (EvalResult::higher_is_better(monitored) ? 1 : -1);
    const bool improved = score > best_score;
    best_score = std::max(best_score, score);
    evals_since_best = improved ? 0 : evals_since_best + 1;
    progress.line("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(c.epochs) + " | test " +
                  last_eval.summary_line() + " | " + format_duration(seconds_since(epoch_start)));
    if (trainer.ema()) progress.line("          ema: test " + last_ema_eval.summary_line());
    nlohmann::json eval_rec = {{"event", "eval"}, {"step", step}, {"epoch", epoch}, {"samples", last_eval.samples}};
    last_eval.add_to(eval_rec, "test_");
    if (trainer.ema()) last_ema_eval.add_to(eval_rec, "test_ema_");
    metrics.write(eval_rec);
    if (tensorboard) tensorboard->write(eval_rec);
    if (c.early_stopping > 0 && evals_since_best >= c.early_stopping) {
      early_stopped = true;
      progress.line("early stopping: no better test " + monitored + " for " + std::to_string(evals_since_best) +
                    " evaluations");
    }
    auto meta = checkpoint_meta(epoch + 1, 0);
    save("epoch-" + std::to_string(epoch + 1) + ".pt", meta);
    save("last.pt", meta);
    if (improved) save("best.pt", meta);
    if (c.save_checkpoints) prune_checkpoints(ckpt_dir.string(), c.keep_checkpoints);
    if (!stop_reason.empty() || early_stopped) break;
  }

  if (!stop_reason.empty()) {
    metrics.write({{"event", "stopped"},
                   {"step", step},
                   {"epoch", last_epoch},
                   {"reason", stop_reason},
                   {"monitor", monitor.finish()}});
    write_report_safely(out_dir);
    progress.line("stopped (" + stop_reason + ") at step " + std::to_string(step) + "; checkpoint " +
                  (ckpt_dir / "last.pt").string());
    progress.line("resume with: gputrain train --output_dir " + out_dir + " --resume auto");
    return stop_reason.rfind("SIG", 0) == 0 ? exit_code_for_signal(stop_signal()) : 0;
  }

  // --- summary
  RunTotals totals{.step = step,
                   .epoch = last_epoch,
                   .steps_this_session = step - first_step,
                   .samples_per_step = samples_per_step,
                   .skipped_steps = skipped,
                   .bad_samples = data.train->bad_samples() + data.test->bad_samples(),
                   .wall_seconds = seconds_since(run_start),
                   .train_seconds = train_seconds,
                   .wait_seconds = wait_seconds};
  const double best_value = EvalResult::higher_is_better(monitored) ? best_score : -best_score;
  nlohmann::json summary = summary_record(totals, monitored, best_value, last_eval, last_ema_eval);
  if (early_stopped) summary["early_stopped"] = true;
  if (ctx.cuda)
    summary["peak_memory_bytes"] = cuda_peak_allocated(ctx.device.index());
  else
    summary["peak_rss_bytes"] = peak_rss_bytes();
  summary["monitor"] = monitor.finish();
  metrics.write(summary);
  print_telemetry(summary["monitor"]);
  write_report_safely(out_dir);
  if (!c.export_path.empty()) {
    if (trainer.ema()) trainer.ema()->swap(trainer.model());  // the average is what a run with EMA deploys
    save_safetensors(c.export_path, model_tensors(trainer.model()),
                     {{"gputrain_model", c.model},
                      {"gputrain_config", config_json.dump()},
                      {"gputrain_version", GPUTRAIN_VERSION},
                      {"gputrain_step", std::to_string(step)},
                      {"gputrain_weights", trainer.ema() ? "ema" : "raw"}});
    if (trainer.ema()) trainer.ema()->swap(trainer.model());
  }
  print_summary(summary, monitored, c, out_dir);
  return 0;
}

}  // namespace gputrain
