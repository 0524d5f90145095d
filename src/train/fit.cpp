// The fit loop: epochs of Trainer steps, evaluation, checkpoints, early stopping and stops. Its
// parts have their own files: the batches (step_batches.h), the log window (step_log.h), the
// stop policy (stop_policy.h) and the evaluations (fit_evaluations.h).
#include "train/fit.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/_foreach_copy.h>
#include <ATen/record_function.h>
#include <fmt/format.h>

#include "core/device_cuda.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/host_memory.h"
#include "core/progress.h"
#include "core/stats.h"
#include "core/text.h"
#include "data/dataset.h"
#include "data/schema.h"
#include "monitor/profiler.h"
#include "step/fine_tune.h"
#include "step/lr_schedule.h"
#include "text/sample.h"
#include "text/token_decoder.h"
#include "train/fit_evaluations.h"
#include "train/step_batches.h"
#include "train/step_log.h"
#include "train/stop_policy.h"
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

// The loss scale halves on every overflow. Below 1 the gradients overflow fp16 even unscaled:
// every step is skipped, and only another precision can train.
constexpr double kCollapsedScale = 1.0;

// Until a save is timed: weights and two optimizer moments at a slow disk's 100 MB/s.
double first_save_guess(Trainer& trainer) {
  int64_t bytes = 0;
  for (const auto& p : trainer.model().parameters()) bytes += p.nbytes();
  return 3.0 * static_cast<double>(bytes) / 1e8;
}

LrSchedule schedule_of(const Config& c, int64_t steps_per_epoch, int64_t total_steps) {
  return {c.lr_schedule, c.lr, c.min_lr, c.warmup_steps, total_steps, steps_per_epoch, c.lr_step_size, c.lr_gamma};
}

class Fit {
 public:
  Fit(Session& s, RunFolder* folder, const CheckpointMeta& start, const nlohmann::json& record,
      Clock::time_point run_start, const FitOptions& options)
      : s_(s),
        folder_(folder),
        target_(options.target),
        start_(start),
        batches_(s.data().train, s.train_loader_options(), s.config().accumulation_steps),
        schedule_(schedule_of(s.config(), batches_.steps_per_epoch(), total_steps())),
        evals_(s),
        log_(s.recipe().device),
        stop_(s.config().time_limit, run_start, first_save_guess(s.trainer()), s.config().log_every),
        progress_(schedule_.total_steps, s.config().epochs, /*quiet=*/folder == nullptr),
        record_(record.dump()) {
    r_.step = r_.first_step = start.step;
    r_.best_score = start.best_score;
    r_.last_epoch = start.epoch;
    r_.evals_since_best = start.evals_since_best;
    // A run that stopped early stays stopped: resuming it only writes the summary again.
    r_.early_stopped = c().early_stopping > 0 && r_.evals_since_best >= c().early_stopping;
    // So does one whose last evaluation reached the target (a resume with a harder one goes on).
    last_eval_ = start.last_eval;
    if (target_ && last_eval_.count(target_->metric)) r_.target_reached = target_->reached(last_eval_.at(target_->metric));
    s.trainer().resume_at(start.step);
    // A language model's figures are per token: the target's tokens in one sample (fixed-size
    // token windows; padded ones vary from batch to batch and are left at samples/s).
    const SampleSchema schema = schema_of(*s.data().train);
    if (const TensorField* t = schema.find(schema.target); t && t->dtype == DType::kI64 && !t->shape.empty() && !t->varies())
      tokens_per_sample_ = Dataset::numel(t->shape);
    peak_ = device_peak_flops(s.recipe(), s.machine());
    // The process that owns the run folder writes the samples (the tokenizer was read once by
    // the Session, which refused one it cannot decode).
    if (c().sample_every > 0 && folder_) decoder_ = TokenDecoder::load(c().tokenizer);
    // The process that owns the run folder profiles (other ranks run the same steps).
    if (!c().profile.empty() && folder_)
      profiler_ = std::make_unique<StepProfiler>(*ProfileRange::parse(c().profile), folder_->path() + "/profile",
                                                 s.recipe().cuda ? s.recipe().device.index() : -1, start.step);
  }

  FitResult run() {
    evals_.start_clock();
    if (auto layout = s_.parallel().layout_record(s_.trainer(), c().pipeline_schedule); !layout.is_null()) {
      layout["step"] = r_.step;
      write(layout);
    }
    // A run stopped during the evaluation after its last step resumes to run that evaluation.
    auto has_work = [&](int64_t epoch) {
      return r_.step < schedule_.total_steps || (epoch == start_.epoch && first_batch() > 0 && !start_.evaluated);
    };
    for (int64_t epoch = start_.epoch;
         epoch < c().epochs && has_work(epoch) && !r_.early_stopped && !r_.target_reached; ++epoch) {
      r_.last_epoch = epoch;
      if (!run_epoch(epoch)) break;
    }
    r_.skipped_steps = log_.skipped_steps();
    r_.eval_seconds = evals_.total_seconds();
    if (profiler_) {
      progress_.line(profiler_->finish(r_.step));
      r_.profiled_steps = profiler_->profiled_steps();
      r_.profiled_seconds = profiler_->profiled_seconds();
    }
    if (r_.stop && folder_) report_stopped();
    // --shard: a run that exports its average ends with it whole (every rank here together).
    if (!r_.stop && trainer().ema() && !c().export_path.empty()) trainer().ema()->gather();
    return r_;
  }

 private:
  Session& s_;
  RunFolder* folder_;  // null in the processes of a job that do not own the run folder
  std::optional<FitTarget> target_;
  CheckpointMeta start_;  // where this process began
  StepBatches batches_;
  LrSchedule schedule_;  // its total_steps: the run's
  FitEvaluations evals_;
  StepLog log_;
  StopPolicy stop_;
  Progress progress_;
  std::string record_;  // config.json's record, in every checkpoint (an AMP fallback adds to it)
  std::map<std::string, double> last_eval_;  // the last epoch evaluation's judged metrics, in checkpoints
  FitResult r_;
  std::unique_ptr<StepProfiler> profiler_;  // --profile on the process that owns the run folder
  // The profiled steps and seconds so far: throughput figures leave out those in their span.
  struct Profiled {
    int64_t steps = 0;
    double seconds = 0;
  };
  Profiled profiled() const {
    return profiler_ ? Profiled{profiler_->profiled_steps(), profiler_->profiled_seconds()} : Profiled{};
  }
  Profiled window_profiled_;  // at the log window's start
  int64_t tokens_per_sample_ = 0;  // > 0: a language model's token windows (tokens/s, per-token MFU)
  std::optional<TokenDecoder> decoder_;  // --sample_every, on the process that owns the run folder
  PeakFlops peak_;
  // With several ranks: the model's buffers and this process's generators before the step in
  // flight. A collective that fails inside it (the gradient sum) leaves the weights as they
  // were, but its forward has moved BatchNorm's statistics and drawn random numbers: they are
  // put back, so that the state kept is exactly the one before the failed step.
  struct BeforeStep {
    std::vector<torch::Tensor> buffers;
    torch::Tensor cpu_rng, cuda_rng;
  } before_;

  const Config& c() const { return s_.config(); }
  Trainer& trainer() { return s_.trainer(); }
  // The position is in samples of the epoch's global order; this run takes them in global batches.
  int64_t first_batch() const { return first_global_batch(start_.samples, s_.global_batch_size()); }

  int64_t total_steps() const {
    check_steps_fit(s_);
    const int64_t total = batches_.steps_per_epoch() * c().epochs;
    return c().max_steps > 0 ? std::min(total, c().max_steps) : total;
  }

  // A metrics record, written by the folder's owner; the job's other processes print only errors.
  void write(const nlohmann::json& record) {
    if (folder_) folder_->write(record);
  }

  void report_stopped() {
    folder_->write({{"event", "stopped"},
                    {"step", r_.step},
                    {"epoch", r_.last_epoch},
                    {"reason", r_.stop.text()},
                    {"monitor", folder_->monitor().finish()}});
    folder_->write_report();
    folder_->status().set_state("stopped", r_.stop.text());
    progress_.line(fmt::format("stopped ({}) at step {}; checkpoint {}", r_.stop.text(), r_.step,
                               folder_->checkpoint_path("last.pt")));
    progress_.line("resume with: " + resume_command(s_.parallel().mesh().ranks, folder_->path()));
  }

  // --unfreeze_at_epoch: from that epoch on (a resume past it, too) everything trains. Every
  // rank reaches the same epoch at the same step, so data parallel's buckets stay paired.
  void unfreeze_if_due(int64_t epoch) {
    if (s_.frozen().empty() || c().unfreeze_at_epoch == 0 || epoch < c().unfreeze_at_epoch) return;
    const auto params = trainer().model().parameters();
    if (std::all_of(params.begin(), params.end(), [](const auto& p) { return p.requires_grad(); })) return;  // done
    set_frozen(trainer().model(), {}, false);
    trainer().trainable_changed();
    if (folder_)
      fmt::print("epoch {}: {} frozen parameters train from here (--unfreeze_at_epoch {})\n", epoch + 1,
                 s_.frozen().size(), c().unfreeze_at_epoch);
    write({{"event", "unfreeze"}, {"epoch", epoch}, {"step", r_.step}, {"parameters", s_.frozen().size()}});
  }

  // Where the run stands after `consumed` micro-batches of `epoch` (each one global batch).
  CheckpointMeta meta(int64_t epoch, int64_t consumed, bool evaluated = false) const {
    CheckpointMeta m{epoch, consumed * s_.global_batch_size(), r_.step, r_.best_score, record_, r_.evals_since_best};
    m.evaluated = evaluated;
    m.last_eval = last_eval_;
    return m;
  }

  // Saves the checkpoints `names` of this step (last.pt always; the others with
  // --save_checkpoints) unless a weight went non-finite: a checkpoint must always be safe to
  // resume from.
  void save(const std::vector<std::string>& names, CheckpointMeta m) {
    std::vector<std::string> saved;
    for (const auto& name : names)
      if (c().save_checkpoints || name == "last.pt") saved.push_back(name);
    if (saved.empty()) return;
    s_.parallel().gather_rng(m, trainer());  // every rank is here: rank 0 writes
    Ema* ema = trainer().ema();
    if (ema) ema->gather();  // --shard: the whole average, for rank 0's files
    // Sharded, every rank writes its own slices: all check theirs and agree (all_finite).
    const bool sharded = trainer().optimizer().sharded();
    if ((folder_ || sharded) && !all_finite(trainer()))
      throw Error({fmt::format("weights or optimizer state not finite at step {}; no checkpoint written", r_.step)},
                  std::string(s_.recipe().precision.amp ? "train without mixed precision (--no-use_amp), " : "") +
                      "lower --lr or set --clip_max_norm; " + last_checkpoint_note(),
                  kExitNonFinite);
    for (const auto& name : saved) {
      // --shard: each rank writes its slices' optimizer state beside the checkpoint first.
      const std::string shards =
          sharded ? s_.parallel().save_shards(folder_ ? folder_->checkpoint_path(name) : "", trainer()) : "";
      if (folder_) stop_.saved(folder_->save_checkpoint(name, trainer(), m, shards));
    }
    if (ema) ema->release();
  }

  // A collective failed (a rank stopped or gone): rank 0 keeps the last step every rank
  // completed in last.pt, with its own random state alone (gathering the others' would be
  // another collective; on resume they draw fresh streams). Best effort: the failure itself is
  // what the run reports.
  void keep_alone(int64_t epoch, int64_t consumed) {
    if (!folder_) return;
    if (trainer().optimizer().sharded()) {  // the other ranks' slices are out of reach now
      progress_.line(fmt::format("could not keep step {}: its sharded optimizer state lives on every rank", r_.step));
      return;
    }
    try {
      if (!all_finite(trainer())) return;
      folder_->save_checkpoint("last.pt", trainer(), meta(epoch, consumed));
      progress_.line(fmt::format("kept step {} in {}", r_.step, folder_->checkpoint_path("last.pt")));
    } catch (const std::exception& e) {
      progress_.line(fmt::format("could not keep step {}: {}", r_.step, e.what()));
    }
  }

  std::string last_checkpoint_note() const {
    const std::string last = folder_ ? folder_->checkpoint_path("last.pt") : "";
    return !last.empty() && std::filesystem::exists(last) ? last + " (before this) is intact" : "no checkpoint was written before";
  }

  std::string finite_hint() const {
    return "an fp16 overflow, diverged weights or test data far outside the training range: try --amp_dtype bf16, "
           "lower --lr or set --clip_max_norm; " +
           last_checkpoint_note();
  }

  void fall_back_amp(double scale, int64_t epoch) {
    const std::string why = fmt::format("the loss scale collapsed to {:g} by step {}", scale, r_.step);
    const std::string to = s_.fall_back_amp(why);
    progress_.line(fmt::format("mixed precision: fp16 -> {} from step {} ({})", to, r_.step + 1, why));
    write({{"event", "amp_fallback"}, {"step", r_.step}, {"epoch", epoch}, {"from", "fp16"}, {"to", to}, {"reason", why}});
    // Checkpoints carry it: a resumed run does not go back to fp16.
    auto record = nlohmann::json::parse(record_);
    record["amp_fallback"] = why;
    record_ = record.dump();
  }

  // Called where the whole job is at the same step (log steps, an epoch's end): one process that
  // gives up makes them all give up there (a NaN in one reaches the others through the gradient
  // sum a step later, so their counts differ by one).
  void check_bad_steps() {
    const int64_t worst = log_.worst_bad_run();
    if (s_.parallel().any(worst >= c().max_bad_steps))
      throw Error({fmt::format("the loss was not finite for {} consecutive steps (by step {})", worst, r_.step)},
                  "lower --lr, set --clip_max_norm, or try --amp_dtype bf16; checkpoints written before are intact",
                  kExitNonFinite);
  }

  // Whether `judged` (the EMA's evaluation when one is kept) reaches the target; the training time
  // to it is the time since the fit began, evaluations excluded.
  void check_target(const EvalResult& judged) {
    if (!target_) return;
    const double v = judged.metric(target_->metric);
    r_.target_metric = v;
    if (target_->reached(v)) {
      r_.target_reached = true;
      r_.target_train_seconds = evals_.training_seconds();
      progress_.line(fmt::format("target {} reached at step {}", target_->text(), r_.step));
    }
  }

  // The raw weights' evaluation and, when kept, the moving average's. Returns false, both left
  // empty and the stop's reason set, when a signal or the deadline interrupted them.
  bool evaluate_both(EvalResult& raw, EvalResult& averaged) {
    // Polled between evaluation batches. With several ranks an evaluation runs to its end (a
    // stop there would be one rank's alone); the next log step agrees on the stop.
    auto must_stop = [&] { return !s_.parallel().mesh().data_parallel() && stop_.now(); };
    const bool done = evals_.run(trainer(), s_.parallel().comm(), must_stop, raw, averaged);
    if (!done) r_.stop = stop_.now();
    stop_.evaluated(evals_.last_seconds());
    return done;
  }

  // The evaluations' records, and the NaN guard on them. `what`: "epoch 3" or "step 120".
  void record_eval(const EvalResult& raw, const EvalResult& averaged, int64_t epoch, const std::string& what,
                   const nlohmann::json& extra = {}) {
    nlohmann::json rec = {{"event", "eval"}, {"step", r_.step}, {"epoch", epoch}, {"samples", raw.samples}};
    if (!extra.is_null()) rec.update(extra);
    raw.add_to(rec, "test_");
    if (trainer().ema()) averaged.add_to(rec, "test_ema_");
    write(rec);
    raw.require_finite(what + " test", finite_hint());
    if (trainer().ema()) averaged.require_finite(what + " test (EMA)", finite_hint());
  }

  // --sample_every: a text the model writes, printed and recorded. Its time is not training's:
  // a log window that just closed starts after it.
  void write_sample() {
    SampleOptions o;
    // The end-of-text token, when the model's vocabulary (--vocab_size) holds it; else id 0.
    const int64_t eot = decoder_->end_of_text();
    o.start = eot >= 0 && eot < s_.data().train->num_classes() ? eot : 0;
    o.tokens = c().sample_tokens;
    o.context = c().positions;
    o.seed = mix_seed(static_cast<uint64_t>(c().seed), 0x5a, static_cast<uint64_t>(r_.step));
    o.precision = s_.recipe().precision;
    const auto ids = sample_tokens(trainer().model(), s_.recipe().device, o);
    const std::string text = decoder_->decode(ids);
    progress_.line(fmt::format("step {} | sample ({} tokens):\n{}", r_.step, ids.size(), text));
    write({{"event", "sample"}, {"step", r_.step}, {"ids", ids}, {"text", text}});
    if (r_.step % c().log_every == 0) {
      log_.start_window();
      window_profiled_ = profiled();
    }
  }

  // --eval_every: an evaluation inside the epoch, for the log and the target (no checkpoint, no
  // "best"). Returns whether the loop must leave the epoch (the target reached, or a stop).
  bool evaluate_inside_epoch(int64_t epoch) {
    check_bad_steps();  // a sync: the steps still queued on the device are training time
    EvalResult raw, averaged;
    if (!evaluate_both(raw, averaged)) return true;
    progress_.line(fmt::format("step {} | test {}", r_.step, raw.summary_line()));
    record_eval(raw, averaged, epoch, fmt::format("step {}", r_.step));
    // The next log window's speed leaves the evaluation out (when one just closed here).
    if (r_.step % c().log_every == 0) {
      log_.start_window();
      window_profiled_ = profiled();
    }
    check_target(trainer().ema() ? averaged : raw);
    return r_.target_reached;
  }

  // One epoch: its steps, then (unless stopped inside it) its evaluation and checkpoints.
  // Returns false when the run stops after it.
  bool run_epoch(int64_t epoch) {
    const auto epoch_start = Clock::now();
    unfreeze_if_due(epoch);
    batches_.start_epoch(epoch, epoch == start_.epoch ? first_batch() : 0);
    log_.start_window();
    const Profiled profiled_before = window_profiled_ = profiled();
    reset_memory_peaks(s_.recipe());
    const int64_t first_step = r_.step;
    const double evals_before = evals_.total_seconds();
    train_steps(epoch);
    if (profiler_) profiler_->end_now();  // the evaluation after the epoch is not a training step
    r_.wait_seconds += batches_.take_wait_seconds();
    const double train_seconds = seconds_since(epoch_start) - (evals_.total_seconds() - evals_before);
    r_.train_seconds += train_seconds;
    const Profiled profiled_after = profiled();
    const nlohmann::json stats =
        epoch_stats(unprofiled_samples_per_second(r_.step - first_step, train_seconds, s_.samples_per_step(),
                                                  profiled_after.steps - profiled_before.steps,
                                                  profiled_after.seconds - profiled_before.seconds));
    check_bad_steps();
    if (r_.target_reached) return false;  // by an evaluation inside the epoch: nothing more to run
    // Stopped inside an epoch: save the position in it. At its very end, finish it normally
    // (evaluation and epoch checkpoint) and stop after.
    const bool epoch_done = batches_.epoch_done() || r_.step >= schedule_.total_steps;
    if (r_.stop && !epoch_done) {
      if (folder_) folder_->status().set_state("stopping", r_.stop.text());
      save({"last.pt"}, meta(epoch, batches_.consumed()));
      return false;
    }
    if (!evaluate_epoch(epoch, stats, epoch_start)) return false;
    return !r_.stop && !r_.early_stopped && !r_.target_reached;
  }

  // The epoch's training (not its evaluation): throughput, MFU, memory peaks.
  nlohmann::json epoch_stats(double sps) const {
    nlohmann::json stats = memory_peaks(s_.recipe());
    stats["train_samples_per_sec"] = sps;
    if (const double mfu = training_mfu(s_.trainer().model().flops_per_sample, sps, peak_); mfu > 0) stats["mfu"] = mfu;
    return stats;
  }

  void train_steps(int64_t epoch) {
    std::vector<Batch> micro;
    micro.reserve(static_cast<size_t>(c().accumulation_steps));
    while (r_.step < schedule_.total_steps) {
      const int64_t done_before = r_.step;
      try {
        if (!one_step(epoch, micro)) break;
      } catch (const CollectiveFailed&) {
        // A rank stopped or gone: keep the last step every rank completed (this one when its
        // update ran: the step counter moved).
        const bool updated = r_.step > done_before;
        if (!updated) restore_before_step();
        keep_alone(epoch, batches_.consumed() - (updated ? 0 : c().accumulation_steps));
        throw;
      }
    }
  }

  void remember_before_step() {
    const std::vector<torch::Tensor> buffers = trainer().model().buffers();
    if (before_.buffers.size() != buffers.size()) {
      before_.buffers.clear();
      for (const auto& b : buffers) before_.buffers.push_back(b.detach().clone());
    } else if (!buffers.empty()) {
      torch::NoGradGuard no_grad;
      at::_foreach_copy_(before_.buffers, buffers);  // one fused copy on a GPU, queued with the step
    }
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      before_.cpu_rng = gen.get_state();
    }
    if (s_.recipe().cuda) before_.cuda_rng = cuda_rng_state(s_.recipe().device.index());
  }

  void restore_before_step() {
    if (before_.buffers.empty() && !before_.cpu_rng.defined()) return;
    try {
      torch::NoGradGuard no_grad;
      const std::vector<torch::Tensor> buffers = trainer().model().buffers();
      for (size_t i = 0; i < buffers.size() && i < before_.buffers.size(); ++i) buffers[i].copy_(before_.buffers[i]);
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(before_.cpu_rng);
      if (before_.cuda_rng.defined()) set_cuda_rng_state(s_.recipe().device.index(), before_.cuda_rng);
    } catch (const std::exception& e) {  // best effort, as the save after it: the failure is the news
      progress_.line(fmt::format("could not put back the state before step {}: {}", r_.step + 1, e.what()));
    }
  }

  // One step, its log and the checks after it, inside the profiler's step region. Returns false
  // when the epoch's loop ends here.
  bool one_step(int64_t epoch, std::vector<Batch>& micro) {
    // (Not at the epoch's tail, which runs no step: the recording would span the evaluation.)
    if (profiler_ && !batches_.epoch_done()) profiler_->before_step(r_.step + 1);
    bool more;
    {
      RECORD_USER_SCOPE("gputrain::step");
      more = step_and_log(epoch, micro);
    }
    if (profiler_) profiler_->after_step(r_.step);
    return more;
  }

  bool step_and_log(int64_t epoch, std::vector<Batch>& micro) {
    const auto step_start = Clock::now();
    {
      RECORD_USER_SCOPE("gputrain::data_wait");
      if (!batches_.next(micro)) return false;  // the epoch's tail
    }
    const double lr = schedule_.at(r_.step);
    trainer().set_lr(lr);
    if (Comm* comm = s_.parallel().comm()) comm->set_step(r_.step + 1);  // named if a collective fails
    const int64_t split_before = trainer().split();
    if (s_.parallel().comm()) remember_before_step();
    const StepResult sr = trainer().step(micro);
    if (trainer().split() != split_before)
      write({{"event", "oom"},
             {"step", r_.step + 1},
             {"epoch", epoch},
             {"micro_batch", c().batch_size / trainer().split()},
             {"accumulation", c().accumulation_steps * trainer().split()},
             {"effective_batch", s_.samples_per_step()}});
    log_.add(sr);
    ++r_.step;
    raise_injected_signal(r_.step, s_.parallel().mesh().ranks.rank);
    const bool log_step = r_.step % c().log_every == 0 || r_.step == schedule_.total_steps;
    if (log_step) log_window(epoch, lr, sr);
    r_.stop = stop_.after_step(r_.step, seconds_since(step_start), log_step, s_.parallel());
    if (r_.stop) return false;
    if (decoder_ && r_.step % c().sample_every == 0) write_sample();
    // (train --until sets the target's from --eval_every; a benchmark's own flag sets it there.)
    const int64_t every = target_ ? target_->eval_every : c().eval_every;
    if (every > 0 && r_.step % every == 0 && r_.step < schedule_.total_steps && !batches_.epoch_done())
      return !evaluate_inside_epoch(epoch);
    return true;
  }

  // A log step: the window's loss and speed in the progress line, status.json and metrics.jsonl;
  // the collapsed-scale fallback and the NaN guard.
  void log_window(int64_t epoch, double lr, const StepResult& sr) {
    nlohmann::json rec = {{"event", "step"}, {"step", r_.step}, {"epoch", epoch}};
    const StepLog::Window w = log_.close(s_.parallel(), c().batch_size, rec);
    // Steps the profiler slowed are left out, unless the window holds nothing else.
    const Profiled now = profiled();
    const int64_t profiled_steps = now.steps - window_profiled_.steps;
    const double profiled_seconds = now.seconds - window_profiled_.seconds;
    window_profiled_ = now;
    if (profiled_steps > 0) rec["profiled_steps"] = profiled_steps;
    const double sps =
        unprofiled_samples_per_second(w.steps, w.seconds, s_.samples_per_step(), profiled_steps, profiled_seconds);
    const double wait = batches_.take_wait_seconds();
    r_.wait_seconds += wait;
    std::string extra;
    if (tokens_per_sample_ > 0) {
      const double tokens = sps * static_cast<double>(tokens_per_sample_);
      rec["tokens_per_sec"] = tokens;
      extra = fmt::format(" | {:.0f} tokens/s", tokens);
      if (const double mfu = training_mfu(trainer().model().flops_per_sample, sps, peak_); mfu > 0) {
        rec["mfu"] = mfu;
        extra += fmt::format(" | MFU {:.1f}%", 100 * mfu);
      }
    }
    progress_.update(r_.step, epoch, w.loss, lr, sps, w.step_ms, extra + w.tail);
    if (folder_)
      folder_->status().update(
          {{"step", r_.step},
           {"total_steps", schedule_.total_steps},
           {"epoch", epoch + 1},
           {"epochs", c().epochs},
           {"loss", w.loss},
           {"samples_per_sec", sps},
           {"eta_seconds", static_cast<double>(schedule_.total_steps - r_.step) * w.step_ms / 1000}});
    rec.update({{"loss", w.loss}, {"lr", lr}, {"samples_per_sec", sps}, {"step_ms", w.step_ms},
                {"data_wait_fraction", w.seconds > 0 ? wait / w.seconds : 0.0}});
    if (sr.grad_norm.defined()) rec["grad_norm"] = sr.grad_norm.item<double>();
    if (s_.recipe().precision.scaler) {
      const double scale = trainer().scaler().get_scale();
      rec["loss_scale"] = scale;
      if (scale < kCollapsedScale) fall_back_amp(scale, epoch);
    }
    r_.skipped_steps = log_.skipped_steps();
    if (r_.skipped_steps) rec["skipped_steps"] = r_.skipped_steps;
    write(rec);
    check_bad_steps();
  }

  // The epoch's evaluation (raw weights, and the EMA's when kept), then its checkpoints.
  // Returns false when a stop interrupted the evaluation.
  bool evaluate_epoch(int64_t epoch, const nlohmann::json& stats, Clock::time_point epoch_start) {
    const int64_t consumed = batches_.consumed();
    if (!evaluate_both(r_.last_eval, r_.last_ema_eval)) {
      // A signal or the deadline during the evaluation: the epoch's steps are saved, its
      // evaluation runs on resume.
      save({"last.pt"}, meta(epoch, consumed));
      return false;
    }
    const std::string& monitored = s_.monitored();
    // The average is what one deploys: it decides "best", early stopping and the target.
    const EvalResult& judged = trainer().ema() ? r_.last_ema_eval : r_.last_eval;
    last_eval_ = judged.metrics();
    // Scores are signed so that higher is better, whatever the metric.
    const double score = judged.metric(monitored) * (EvalResult::higher_is_better(monitored) ? 1 : -1);
    const bool improved = score > r_.best_score;
    r_.best_score = std::max(r_.best_score, score);
    r_.evals_since_best = improved ? 0 : r_.evals_since_best + 1;
    progress_.line(fmt::format("epoch {}/{} | test {} | {}", epoch + 1, c().epochs, r_.last_eval.summary_line(),
                               format_duration(seconds_since(epoch_start))));
    if (trainer().ema()) progress_.line("          ema: test " + r_.last_ema_eval.summary_line());
    record_eval(r_.last_eval, r_.last_ema_eval, epoch, fmt::format("epoch {}", epoch + 1), stats);
    check_target(judged);
    if (c().early_stopping > 0 && r_.evals_since_best >= c().early_stopping) {
      r_.early_stopped = true;
      progress_.line(
          fmt::format("early stopping: no better test {} for {} evaluations", monitored, r_.evals_since_best));
    }
    // A --max_steps end inside the epoch is evaluated there, and a resume with more steps goes on
    // inside it; a whole epoch continues with the next.
    const bool whole_epoch = batches_.epoch_done();
    const auto m = whole_epoch ? meta(epoch + 1, 0) : meta(epoch, consumed, /*evaluated=*/true);
    std::vector<std::string> names = {"last.pt"};
    if (whole_epoch) names.insert(names.begin(), fmt::format("epoch-{}.pt", epoch + 1));
    if (improved) names.push_back("best.pt");
    save(names, m);
    if (c().save_checkpoints && folder_) folder_->prune_checkpoints(c().keep_checkpoints);
    return true;
  }
};

}  // namespace

void check_steps_fit(const Session& s) {
  const Config& c = s.config();
  if (s.steps_per_epoch() > 0) return;
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
  keep_freed_blocks();  // the steps free and allocate the same large tensors: keep them (core/host_memory.h)
  return Fit(session, folder, start, config_record, run_start, options).run();
}

}  // namespace gputrain
