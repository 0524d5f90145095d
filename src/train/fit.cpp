// The fit loop: epochs of Trainer steps, evaluation, checkpoints, early stopping and stops.
#include "train/fit.h"

#include <cmath>
#include <csignal>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/faults.h"
#include "core/progress.h"
#include "core/signals.h"
#include "core/text.h"
#include "train/fine_tune.h"
#include "train/lr_schedule.h"
#include "train/optim.h"
#include "train/utilization.h"

namespace gputrain {
namespace {

// The command that continues a stopped run: as many ranks, started the way this one was
// (another number of ranks works too: the run keeps its global batch).
std::string resume_command(const RankEnv& e, const std::string& folder) {
  const std::string train = "train --output_dir " + folder + " --resume auto";
  if (e.world_size == 1) return "gputrain " + train;
  if (e.source == "slurm") return fmt::format("the job's srun line ({} tasks) with gputrain {}", e.world_size, train);
  std::string launch = fmt::format("gputrain launch --nproc_per_node {}", e.local_world_size);
  const int nodes = e.world_size / std::max(1, e.local_world_size);
  if (nodes > 1)
    launch += fmt::format(" --nnodes {} --node_rank <0..{}> --master_addr {} --master_port {}", nodes, nodes - 1,
                          e.master_addr, e.master_port);
  return launch + " -- " + train + " (or the job's torchrun line with --resume auto)";
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class Fit {
 public:
  Fit(Session& s, RunFolder* folder, const CheckpointMeta& start, const nlohmann::json& record,
      Clock::time_point run_start, const FitOptions& options)
      : s_(s),
        target_(options.target),
        c_(s.config()),
        trainer_(s.trainer()),
        folder_(folder),
        parallel_(s.parallel()),
        record_(record.dump()),
        run_start_(run_start),
        train_loader_(s.data().train, s.train_loader_options()),
        test_loader_(s.data().test, s.eval_loader_options(c_.eval_batch_size, /*sharded=*/true)),
        micro_per_epoch_(train_loader_.num_batches()),
        steps_per_epoch_(micro_per_epoch_ / c_.accumulation_steps),
        total_steps_(total_steps()),
        schedule_{c_.lr_schedule,   c_.lr,           c_.min_lr,  c_.warmup_steps, total_steps_,
                  steps_per_epoch_, c_.lr_step_size, c_.lr_gamma},
        first_epoch_(start.epoch),
        // The position is in samples of the epoch's global order; this run takes them in global
        // batches (a remainder short of one, after a change of global batch, is skipped).
        first_batch_(start.samples / s.global_batch_size()),
        first_evaluated_(start.evaluated),
        progress_(total_steps_, c_.epochs, /*quiet=*/folder == nullptr),
        time_limit_(c_.time_limit.empty() ? 0 : parse_duration(c_.time_limit)) {
    r_.step = r_.first_step = start.step;
    r_.best_score = start.best_score;
    r_.last_epoch = start.epoch;
    evals_since_best_ = start.evals_since_best;
    // A run that stopped early stays stopped: resuming it only writes the summary again.
    r_.early_stopped = c_.early_stopping > 0 && evals_since_best_ >= c_.early_stopping;
    auto device_long = torch::TensorOptions().dtype(torch::kLong).device(s.recipe().device);
    bad_run_ = torch::zeros({}, device_long);
    worst_bad_run_ = torch::zeros({}, device_long);
    // Until a save is timed: weights and two optimizer moments at a slow disk's 100 MB/s.
    int64_t bytes = 0;
    for (const auto& p : trainer_.model().parameters()) bytes += p.nbytes();
    last_save_seconds_ = 3.0 * static_cast<double>(bytes) / 1e8;
    peak_ = device_peak_flops(s.recipe(), s.machine());
  }

  FitResult run() {
    fit_start_ = Clock::now();
    if (auto layout = parallel_.layout_record(trainer_, c_.pipeline_schedule); !layout.is_null()) {
      layout["step"] = r_.step;
      write(layout);
    }
    // A run stopped during the evaluation after its last step resumes to run that evaluation.
    auto has_work = [&](int64_t epoch) {
      return r_.step < total_steps_ || (epoch == first_epoch_ && first_batch_ > 0 && !first_evaluated_);
    };
    for (int64_t epoch = first_epoch_; epoch < c_.epochs && has_work(epoch) && !r_.early_stopped && !r_.target_reached;
         ++epoch) {
      r_.last_epoch = epoch;
      if (!run_epoch(epoch)) break;
    }
    read_skipped();
    if (!r_.stop_reason.empty()) {
      if (!folder_) return r_;
      folder_->write({{"event", "stopped"},
                      {"step", r_.step},
                      {"epoch", r_.last_epoch},
                      {"reason", r_.stop_reason},
                      {"monitor", folder_->monitor().finish()}});
      folder_->write_report();
      folder_->status().set_state("stopped", r_.stop_reason);
      progress_.line(fmt::format("stopped ({}) at step {}; checkpoint {}", r_.stop_reason, r_.step,
                                 folder_->checkpoint_path("last.pt")));
      progress_.line("resume with: " + resume_command(parallel_.mesh().ranks, folder_->path()));
    }
    return r_;
  }

 private:
  Session& s_;
  std::optional<FitTarget> target_;
  Clock::time_point fit_start_;
  double epoch_eval_seconds_ = 0;  // evaluations inside the current epoch (--eval_every)
  const Config& c_;
  Trainer& trainer_;
  RunFolder* folder_;  // null in the processes of a job that do not own the run folder
  bool unfrozen_ = false;
  const Parallelism& parallel_;
  std::string record_;
  Clock::time_point run_start_;
  Loader train_loader_, test_loader_;
  int64_t micro_per_epoch_, steps_per_epoch_, total_steps_;
  LrSchedule schedule_;
  int64_t first_epoch_, first_batch_;
  bool first_evaluated_;
  Progress progress_;
  double time_limit_;
  double last_save_seconds_ = 0, last_eval_seconds_ = 0, step_seconds_ = 0;
  int64_t steps_timed_ = 0;
  // With several ranks: steps between the ranks' agreements on a stop (each one a small
  // all-reduce and a host sync). Agreed at each check from rank 0's step time, so that a signal
  // or the time limit is acted on within about kStopCheckSeconds, at most every log step.
  int64_t stop_every_ = 1;
  static constexpr double kStopCheckSeconds = 0.5;
  int64_t evals_since_best_ = 0;
  torch::Tensor bad_run_, worst_bad_run_;  // consecutive non-finite losses, counted on the device
  torch::Tensor skipped_total_;            // overflow steps the scaler skipped, on the device
  PeakFlops peak_;                         // the device's, for MFU
  nlohmann::json epoch_stats_;             // the last epoch's throughput, MFU and memory peaks
  FitResult r_;

  // A metrics record, written by the folder's owner; the job's other processes print only errors.
  void write(const nlohmann::json& record) {
    if (folder_) folder_->write(record);
  }

  // --unfreeze_at_epoch: from that epoch on (a resume past it, too) everything trains. Every
  // rank reaches the same epoch at the same step, so data parallel's buckets stay paired.
  void unfreeze_if_due(int64_t epoch) {
    if (unfrozen_ || s_.frozen().empty() || c_.unfreeze_at_epoch == 0 || epoch < c_.unfreeze_at_epoch) return;
    unfrozen_ = true;
    set_frozen(trainer_.model(), {}, false);
    trainer_.trainable_changed();
    if (folder_)
      fmt::print("epoch {}: {} frozen parameters train from here (--unfreeze_at_epoch {})\n", epoch + 1,
                 s_.frozen().size(), c_.unfreeze_at_epoch);
    write({{"event", "unfreeze"}, {"epoch", epoch}, {"step", r_.step}, {"parameters", s_.frozen().size()}});
  }

  int64_t total_steps() const {
    check_steps_fit(s_);
    const int64_t total = steps_per_epoch_ * c_.epochs;
    return c_.max_steps > 0 ? std::min(total, c_.max_steps) : total;
  }

  // Why the run must stop now ("" when it need not): a signal, or the time limit coming within
  // `reserve` seconds (what runs before the next check) plus a save and a little slack (2 s, or
  // a tenth of a short limit, so that a limit of a few seconds still trains until it is near).
  std::string stop_now(double reserve) const {
    if (stop_signal()) return stop_signal() == SIGTERM ? "SIGTERM" : "SIGINT";
    const double slack = std::min(2.0, 0.1 * time_limit_);
    if (time_limit_ > 0 && seconds_since(run_start_) + reserve + 3 * last_save_seconds_ + slack >= time_limit_)
      return "time limit " + c_.time_limit;
    return "";
  }

  // Where the run stands after `consumed` micro-batches of `epoch` (each one global batch).
  CheckpointMeta meta(int64_t epoch, int64_t consumed, bool evaluated = false) const {
    CheckpointMeta m{epoch, consumed * s_.global_batch_size(), r_.step, r_.best_score, record_, evals_since_best_};
    m.evaluated = evaluated;
    return m;
  }

  // Saves unless a weight went non-finite: a checkpoint must always be safe to resume from.
  void save(const std::string& name, CheckpointMeta m) {
    if (!c_.save_checkpoints && name != "last.pt") return;
    parallel_.gather_rng(m, trainer_);  // every rank is here: rank 0 writes
    if (!folder_) return;
    if (!all_finite(trainer_))
      throw Error({fmt::format("weights or optimizer state not finite at step {}; no checkpoint written", r_.step)},
                  std::string(s_.recipe().amp ? "train without mixed precision (--no-use_amp), " : "") +
                      "lower --lr or set --clip_max_norm; " + last_checkpoint_note(),
                  kExitNonFinite);
    last_save_seconds_ = folder_->save_checkpoint(name, trainer_, m);
  }

  // A collective failed (a rank stopped or gone): rank 0 keeps the last step every rank
  // completed in last.pt, with its own random state alone (gathering the others' would be
  // another collective; on resume they draw fresh streams). Best effort: the failure itself is
  // what the run reports.
  void keep_alone(int64_t epoch, int64_t consumed) {
    if (!folder_) return;
    try {
      if (!all_finite(trainer_)) return;
      folder_->save_checkpoint("last.pt", trainer_, meta(epoch, consumed));
      progress_.line(fmt::format("kept step {} in {}", r_.step, folder_->checkpoint_path("last.pt")));
    } catch (const std::exception& e) {
      progress_.line(fmt::format("could not keep step {}: {}", r_.step, e.what()));
    }
  }

  void read_skipped() {
    if (skipped_total_.defined()) r_.skipped_steps = std::llround(skipped_total_.item<double>());
  }

  std::string last_checkpoint_note() const {
    const std::string last = folder_ ? folder_->checkpoint_path("last.pt") : "";
    return !last.empty() && std::filesystem::exists(last) ? last + " (before this) is intact" : "no checkpoint was written before";
  }

  // The loss scale halves on every overflow. Below 1 the gradients overflow fp16 even
  // unscaled: every step is skipped, and only another precision can train.
  static constexpr double kCollapsedScale = 1.0;

  void fall_back_amp(double scale, int64_t epoch) {
    const std::string why = fmt::format("the loss scale collapsed to {:g} by step {}", scale, r_.step);
    const std::string to = s_.fall_back_amp(why);
    progress_.line(fmt::format("mixed precision: fp16 -> {} from step {} ({})", to, r_.step + 1, why));
    write({{"event", "amp_fallback"}, {"step", r_.step}, {"epoch", epoch}, {"from", "fp16"}, {"to", to},
                   {"reason", why}});
    // Checkpoints carry it: a resumed run does not go back to fp16.
    auto record = nlohmann::json::parse(record_);
    record["amp_fallback"] = why;
    record_ = record.dump();
  }

  // Called where the whole job is at the same step (log steps, an epoch's end): one process that
  // gives up makes them all give up there (a NaN in one reaches the others through the gradient
  // sum a step later, so their counts differ by one).
  void check_bad_steps() {
    const int64_t worst = worst_bad_run_.item<int64_t>();
    if (parallel_.any(worst >= c_.max_bad_steps))
      throw Error({fmt::format("the loss was not finite for {} consecutive steps (by step {})", worst, r_.step)},
                  "lower --lr, set --clip_max_norm, or try --amp_dtype bf16; checkpoints written before are intact",
                  kExitNonFinite);
  }

  // Whether `judged` (the EMA's evaluation when one is kept) reaches the target; the training time
  // to it is the time since the fit began, evaluations excluded.
  void check_target(const EvalResult& judged, double train_seconds) {
    if (!target_) return;
    const double v = judged.metric(target_->metric);
    r_.target_metric = v;
    if (target_->higher_is_better() ? v >= target_->value : v <= target_->value) {
      r_.target_reached = true;
      r_.target_train_seconds = train_seconds;
      progress_.line(fmt::format("target {} reached at step {}", target_->text(), r_.step));
    }
  }

  // --eval_every: an evaluation inside the epoch, for the target alone (no checkpoint, no "best").
  // Returns whether the target was reached.
  bool evaluate_for_target(int64_t epoch) {
    EvalResult raw, averaged;
    if (!evaluate_both(raw, averaged)) return false;
    nlohmann::json rec = {{"event", "eval"}, {"step", r_.step}, {"epoch", epoch}, {"samples", raw.samples}};
    raw.add_to(rec, "test_");
    if (trainer_.ema()) averaged.add_to(rec, "test_ema_");
    write(rec);
    raw.require_finite(fmt::format("step {} test", r_.step), finite_hint());
    if (trainer_.ema()) averaged.require_finite(fmt::format("step {} test (EMA)", r_.step), finite_hint());
    check_target(trainer_.ema() ? averaged : raw, seconds_since(fit_start_) - r_.eval_seconds);
    return r_.target_reached;
  }

  // The raw weights' evaluation and, when kept, the moving average's. Returns false, both left
  // empty and the stop's reason set, when a signal or the deadline interrupted them.
  bool evaluate_both(EvalResult& raw, EvalResult& averaged) {
    // Polled between evaluation batches. With several ranks an evaluation runs to its end (a
    // stop there would be one rank's alone); the next log step agrees on the stop.
    auto must_stop = [&] { return !parallel_.mesh().data_parallel() && !stop_now(0).empty(); };
    const auto eval_start = Clock::now();
    raw = evaluate(trainer_, test_loader_, must_stop, parallel_.comm());
    averaged = EvalResult{};
    if (trainer_.ema() && !raw.interrupted) {
      trainer_.ema()->swap(trainer_.model());
      averaged = evaluate(trainer_, test_loader_, must_stop, parallel_.comm());
      trainer_.ema()->swap(trainer_.model());
    }
    if (raw.interrupted || averaged.interrupted) {
      raw = averaged = EvalResult{};
      r_.stop_reason = stop_now(0);
      return false;
    }
    last_eval_seconds_ = seconds_since(eval_start);
    r_.eval_seconds += last_eval_seconds_;
    return true;
  }

  std::string finite_hint() const {
    return "an fp16 overflow, diverged weights or test data far outside the training range: try --amp_dtype bf16, "
           "lower --lr or set --clip_max_norm; " +
           last_checkpoint_note();
  }

  // One epoch: its steps, then (unless stopped inside it) its evaluation and checkpoints.
  // Returns false when the run stops after it.
  bool run_epoch(int64_t epoch) {
    const auto epoch_start = Clock::now();
    int64_t consumed = epoch == first_epoch_ ? first_batch_ : 0;  // micro-batches taken this epoch
    unfreeze_if_due(epoch);
    train_loader_.start_epoch(epoch, consumed);
    reset_memory_peaks(s_.recipe());
    const int64_t first_step = r_.step;
    epoch_eval_seconds_ = 0;
    train_steps(epoch, consumed);
    r_.wait_seconds += train_loader_.take_wait_seconds();
    const double train_seconds = seconds_since(epoch_start) - epoch_eval_seconds_;
    r_.train_seconds += train_seconds;
    // The epoch's training (not its evaluation): throughput, MFU, memory peaks.
    const double sps =
        train_seconds > 0
            ? static_cast<double>((r_.step - first_step) * s_.global_batch_size() * c_.accumulation_steps) / train_seconds
            : 0;
    epoch_stats_ = memory_peaks(s_.recipe());
    epoch_stats_["train_samples_per_sec"] = sps;
    if (const double mfu = training_mfu(trainer_.model().flops_per_sample, sps, peak_); mfu > 0) epoch_stats_["mfu"] = mfu;
    check_bad_steps();
    if (r_.target_reached) return false;  // by an evaluation inside the epoch: nothing more to run
    // Stopped inside an epoch: save the position in it. At its very end, finish it normally
    // (evaluation and epoch checkpoint) and stop after.
    const bool epoch_done = consumed + c_.accumulation_steps > micro_per_epoch_ || r_.step >= total_steps_;
    if (!r_.stop_reason.empty() && !epoch_done) {
      if (folder_) folder_->status().set_state("stopping", r_.stop_reason);
      save("last.pt", meta(epoch, consumed));
      return false;
    }
    if (!evaluate_epoch(epoch, consumed, epoch_start)) return false;
    return r_.stop_reason.empty() && !r_.early_stopped && !r_.target_reached;
  }

  void train_steps(int64_t epoch, int64_t& consumed) {
    const int64_t samples_per_step = s_.global_batch_size() * c_.accumulation_steps;
    std::vector<Batch> micro;
    micro.reserve(static_cast<size_t>(c_.accumulation_steps));
    torch::Tensor loss_sum;
    int64_t window_steps = 0;
    auto window_start = Clock::now();
    while (r_.step < total_steps_) {
      const int64_t done_before = r_.step;
      try {
        const auto step_start = Clock::now();
        micro.clear();
        while (static_cast<int64_t>(micro.size()) < c_.accumulation_steps) {
          auto host = train_loader_.next();
          if (!host) break;
          micro.push_back(std::move(*host));
        }
        if (static_cast<int64_t>(micro.size()) < c_.accumulation_steps) break;  // epoch tail
        consumed += c_.accumulation_steps;
        if (faults().nan_step >= 0 && r_.step >= faults().nan_step &&
            (faults().nan_rank < 0 || faults().nan_rank == parallel_.mesh().ranks.rank))
          micro[0].x = micro[0].x * std::nan("");

        const double lr = schedule_.at(r_.step);
        trainer_.set_lr(lr);
        if (Comm* comm = parallel_.comm()) comm->set_step(r_.step + 1);  // named if a collective fails
        const int64_t split_before = trainer_.split();
        StepResult sr = trainer_.step(micro);
        if (trainer_.split() != split_before)
          write({{"event", "oom"},
                         {"step", r_.step + 1},
                         {"epoch", epoch},
                         {"micro_batch", c_.batch_size / trainer_.split()},
                         {"accumulation", c_.accumulation_steps * trainer_.split()},
                         {"effective_batch", samples_per_step}});
        if (sr.skipped.defined())  // counted on the device, read with the loss at log steps
          skipped_total_ = skipped_total_.defined() ? skipped_total_ + sr.skipped : sr.skipped.clone();
        bad_run_ = torch::where(torch::isfinite(sr.loss), torch::zeros_like(bad_run_), bad_run_ + 1);
        worst_bad_run_ = torch::maximum(worst_bad_run_, bad_run_);
        loss_sum = loss_sum.defined() ? loss_sum + sr.loss : sr.loss;
        ++r_.step;
        ++window_steps;
        if (r_.step == faults().sigterm_step) std::raise(SIGTERM);  // a real signal, at a known step
        if (r_.step == faults().kill_step) std::raise(SIGKILL);
        if (r_.step == faults().stop_step && parallel_.mesh().ranks.rank == faults().stop_rank) std::raise(SIGSTOP);

        const bool log_step = r_.step % c_.log_every == 0 || r_.step == total_steps_;
        if (log_step) {
          // Reading the loss to print it syncs the host with the device: only at log steps.
          // (With an unfused optimizer the fp16 grad scaler also reads its overflow flag every step.)
          const double secs = seconds_since(window_start);
          const double step_ms = 1000.0 * secs / static_cast<double>(window_steps);
          nlohmann::json rec = {{"event", "step"}, {"step", r_.step}, {"epoch", epoch}};
          std::string log_tail;
          const double loss = parallel_.log_window(loss_sum, window_steps, c_.batch_size, step_ms, rec, log_tail);
          const double sps = static_cast<double>(window_steps * samples_per_step) / secs;
          const double wait = train_loader_.take_wait_seconds();
          r_.wait_seconds += wait;
          progress_.update(r_.step, epoch, loss, lr, sps, step_ms, log_tail);
          if (folder_)
            folder_->status().update({{"step", r_.step},
                                      {"total_steps", total_steps_},
                                      {"epoch", epoch + 1},
                                      {"epochs", c_.epochs},
                                      {"loss", loss},
                                      {"samples_per_sec", sps},
                                      {"eta_seconds", static_cast<double>(total_steps_ - r_.step) * step_ms / 1000}});
          rec.update({{"loss", loss}, {"lr", lr}, {"samples_per_sec", sps}, {"step_ms", step_ms},
                      {"data_wait_fraction", secs > 0 ? wait / secs : 0.0}});
          if (sr.grad_norm.defined()) rec["grad_norm"] = sr.grad_norm.item<double>();
          if (s_.recipe().grad_scaler) rec["loss_scale"] = trainer_.scaler().get_scale();
          if (s_.recipe().grad_scaler && rec["loss_scale"].get<double>() < kCollapsedScale)
            fall_back_amp(rec["loss_scale"].get<double>(), epoch);
          read_skipped();
          if (r_.skipped_steps) rec["skipped_steps"] = r_.skipped_steps;
          write(rec);
          loss_sum = torch::Tensor();
          window_steps = 0;
          window_start = Clock::now();
          check_bad_steps();
        }

        // Stop between steps: on a signal, or when the next step, a save and an evaluation
        // might not fit before the time limit. A step's time is a moving average of recent steps
        // (data wait included), so neither set-up nor the first step's warm-up inflates it.
        // The session's first step (allocations, autotuning) is replaced by the second, not averaged in.
        const double took = seconds_since(step_start);
        step_seconds_ = steps_timed_++ < 2 ? took : 0.7 * step_seconds_ + 0.3 * took;
        const std::string stop = stop_now(static_cast<double>(stop_every_ + 1) * step_seconds_ + last_eval_seconds_);
        if (log_step || r_.step % stop_every_ == 0) {
          int64_t every = std::clamp<int64_t>(static_cast<int64_t>(kStopCheckSeconds / std::max(step_seconds_, 1e-6)), 1,
                                              c_.log_every);
          r_.stop_reason = parallel_.agree_stop(stop, c_.time_limit, every);
          stop_every_ = every;
        }
        if (!r_.stop_reason.empty()) break;
        if (target_ && target_->eval_every > 0 && r_.step % target_->eval_every == 0 && r_.step < total_steps_ &&
            consumed + c_.accumulation_steps <= micro_per_epoch_) {
          check_bad_steps();  // a sync: the steps still queued on the device are training time
          const auto eval_start = Clock::now();
          const bool reached = evaluate_for_target(epoch);
          epoch_eval_seconds_ += seconds_since(eval_start);
          if (reached || !r_.stop_reason.empty()) break;
        }
      } catch (const CollectiveFailed&) {
        // A rank stopped or gone: keep the last step every rank completed (this one when
        // its update ran: the step counter moved).
        keep_alone(epoch, r_.step > done_before ? consumed : consumed - c_.accumulation_steps);
        throw;
      }
    }
  }

  // The epoch's evaluation (raw weights, and the EMA's when kept), then its checkpoints.
  // Returns false when a stop interrupted the evaluation.
  bool evaluate_epoch(int64_t epoch, int64_t consumed, Clock::time_point epoch_start) {
    if (!evaluate_both(r_.last_eval, r_.last_ema_eval)) {
      // A signal or the deadline during the evaluation: the epoch's steps are saved, its
      // evaluation runs on resume.
      save("last.pt", meta(epoch, consumed));
      return false;
    }
    const std::string& monitored = s_.monitored();
    // The average is what one deploys: it decides "best", early stopping and the target.
    const EvalResult& judged = trainer_.ema() ? r_.last_ema_eval : r_.last_eval;
    const double train_seconds_to_now = seconds_since(fit_start_) - r_.eval_seconds;
    // Scores are signed so that higher is better, whatever the metric.
    const double score = judged.metric(monitored) * (EvalResult::higher_is_better(monitored) ? 1 : -1);
    const bool improved = score > r_.best_score;
    r_.best_score = std::max(r_.best_score, score);
    evals_since_best_ = improved ? 0 : evals_since_best_ + 1;
    progress_.line(fmt::format("epoch {}/{} | test {} | {}", epoch + 1, c_.epochs, r_.last_eval.summary_line(),
                               format_duration(seconds_since(epoch_start))));
    if (trainer_.ema()) progress_.line("          ema: test " + r_.last_ema_eval.summary_line());
    nlohmann::json rec = {{"event", "eval"}, {"step", r_.step}, {"epoch", epoch}, {"samples", r_.last_eval.samples}};
    rec.update(epoch_stats_);
    r_.last_eval.add_to(rec, "test_");
    if (trainer_.ema()) r_.last_ema_eval.add_to(rec, "test_ema_");
    write(rec);
    r_.last_eval.require_finite(fmt::format("epoch {} test", epoch + 1), finite_hint());
    if (trainer_.ema()) r_.last_ema_eval.require_finite(fmt::format("epoch {} test (EMA)", epoch + 1), finite_hint());
    check_target(judged, train_seconds_to_now);
    if (c_.early_stopping > 0 && evals_since_best_ >= c_.early_stopping) {
      r_.early_stopped = true;
      progress_.line(fmt::format("early stopping: no better test {} for {} evaluations", monitored, evals_since_best_));
    }
    // A --max_steps end inside the epoch is evaluated there, and a resume with more steps goes on
    // inside it; a whole epoch continues with the next.
    const bool whole_epoch = consumed + c_.accumulation_steps > micro_per_epoch_;
    const auto m = whole_epoch ? meta(epoch + 1, 0) : meta(epoch, consumed, /*evaluated=*/true);
    if (whole_epoch) save(fmt::format("epoch-{}.pt", epoch + 1), m);
    save("last.pt", m);
    if (improved) save("best.pt", m);
    if (c_.save_checkpoints && folder_) folder_->prune_checkpoints(c_.keep_checkpoints);
    return true;
  }
};

}  // namespace

void check_steps_fit(const Session& s) {
  const Config& c = s.config();
  if (batches_per_epoch(s.data().train->size(), s.train_loader_options()) >= c.accumulation_steps) return;
  const int ranks = s.parallel().mesh().ranks.world_size;
  // With several ranks each step takes a global batch: that is what the data must hold.
  const std::string batch = ranks == 1 ? fmt::format("batch_size {}", c.batch_size)
                                       : fmt::format("the global batch {} ({} ranks, --batch_size {} on this one)",
                                                     s.global_batch_size(), ranks, c.batch_size);
  throw usage_error(fmt::format("{} x accumulation_steps {} is more than the {} training samples", batch,
                                c.accumulation_steps, s.data().train->size()),
                    ranks == 1 ? "lower --batch_size or --accumulation_steps"
                               : "lower --batch_size or --accumulation_steps, or start fewer ranks");
}

FitResult fit(Session& session, RunFolder* folder, const CheckpointMeta& start, const nlohmann::json& config_record,
              Clock::time_point run_start, const FitOptions& options) {
  return Fit(session, folder, start, config_record, run_start, options).run();
}

}  // namespace gputrain
