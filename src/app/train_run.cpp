// `gputrain train`: configuration -> Session -> run folder -> fit -> summary.
#include "app/train_run.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "config/config_table.h"
#include "config/fields.h"
#include "config/merge.h"
#include "core/atomic_file.h"
#include "core/device_cuda.h"
#include "core/device_probe.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/output_paths.h"
#include "core/host_info.h"
#include "core/signals.h"
#include "core/text.h"
#include "data/data_fingerprint.h"
#include "data/loader.h"
#include "data/schema.h"
#include "models/family.h"
#include "parallel/rank_env.h"
#include "weights/safetensors.h"
#include "train/fit.h"
#include "train/run_program.h"
#include "app/resume_changes.h"
#include "app/run_summary.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

using Clock = std::chrono::steady_clock;

// Continuing from a checkpoint: its run's requested configuration under the flags, its
// resolved half (what the Session keeps of it), and where that run itself branched from.
struct Continued {
  Config requested;
  nlohmann::json pinned;
  std::string branched_from;
  std::string amp_fallback;  // why mixed precision fell back during that run ("" if it did not)
  // How that run's ranks took batches: its world size and global batch size.
  int64_t world_size = 1, global_batch_size = 0;
  nlohmann::json record;  // the recorded run's whole record (null for a new run): what a resume compares
  std::string program_dir;  // the folder holding that run's copy of its program (train/run_program.h)
};

// The samples one optimizer step of a recorded run took (0 when its record does not say).
int64_t recorded_samples_per_step(const nlohmann::json& record) {
  const auto resolved = read_config_record(record).resolved;
  const int64_t accumulation = resolved.is_object() ? resolved.value("accumulation_steps", int64_t{1}) : 1;
  return record_global_batch(record) * accumulation;
}

Continued continue_from(const std::string& checkpoint, const std::vector<FlagArg>& flags) {
  const auto record = checkpoint_record(checkpoint, read_checkpoint_meta(checkpoint));
  StoredConfig saved = read_config_record(record);
  Continued run{resolve_resumed_config(saved.requested, flags), saved.resolved, record.value("branched_from", ""),
                record.value("amp_fallback", ""), record.value("world_size", int64_t{1}), record_global_batch(record),
                record, run_dir_of(checkpoint)};
  // A checkpoint in <run>/checkpoints/ continues in <run>, wherever the run was started from.
  const fs::path folder = fs::path(checkpoint).parent_path();
  if (!has_flag(flags, "output_dir") && folder.filename() == "checkpoints")
    run.requested.output_dir = folder.parent_path();
  // A batch size given now wins over the one the run's first auto_batch_size search found.
  if (has_flag(flags, "batch_size") && run.pinned.is_object()) run.pinned.erase("batch_size");
  return run;
}

// The job a run folder's config.json records, to start again from the beginning in that folder.
Continued restart_recorded(const std::string& config_json, const std::vector<FlagArg>& flags) {
  nlohmann::json record;
  try {
    std::ifstream in(config_json);
    record = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    throw usage_error("the run's config.json '" + config_json + "' cannot be read: no job to start again",
                      "give the run's flags (or --preset) with --resume auto, or use a new --output_dir");
  }
  const StoredConfig saved = read_config_record(record);
  Continued run{resolve_resumed_config(saved.requested, flags), nlohmann::json::object(), "", "", 1, 0, record,
                fs::path(config_json).parent_path().string()};
  if (!has_flag(flags, "output_dir")) run.requested.output_dir = fs::path(config_json).parent_path().parent_path();
  return run;
}

void print_session(const Session& s) {
  print_config_table(s.resolution());
  fmt::print("device report:\n");
  for (const auto& [what, state] : s.recipe().report) fmt::print("  {:<21} {}\n", what, state);
  fmt::print("data: {}\nschema: {}\n", s.data().description, schema_of(*s.data().train).text());
  if (s.requested().auto_batch_size) {
    const std::string why = s.resolution().reason("batch_size");
    if (s.batch_search().is_null())
      fmt::print("{}; keeping --batch_size {}\n", why, s.config().batch_size);
    else
      fmt::print("auto_batch_size: {} ({})\n", s.config().batch_size, why);
  }
  fmt::print("session: {}\n", s.describe_line());
  for (const auto& line : s.init_report().lines) fmt::print("{}\n", line);
}

void export_weights(Session& s, const std::string& record, int64_t step) {
  Trainer& t = s.trainer();
  if (t.ema()) t.ema()->swap(t.model());  // the average is what a run with EMA deploys
  save_safetensors(s.config().export_path, with_tied_names(model_tensors(t.model()), family(s.config().model).tied),
                   {{"gputrain_model", s.config().model},
                    {"gputrain_config", record},
                    {"gputrain_version", GPUTRAIN_VERSION},
                    {"gputrain_step", std::to_string(step)},
                    {"gputrain_weights", t.ema() ? "ema" : "raw"}});
  if (t.ema()) t.ema()->swap(t.model());
}

// A model from a file: --model's program for a new run (loaded from where the user named it, so
// that any problem names that file), the recorded run's own copy for a resume (found again and
// checked); copied into `folder` either way. Returns its record (null for a model gputrain builds).
nlohmann::json use_kept_program(RunFolder& folder, Continued& run, const std::vector<FlagArg>& flags) {
  const auto recorded = run.record.is_object() ? run.record.value("program", nlohmann::json()) : nlohmann::json();
  if (recorded.is_object()) {
    run.requested.model = find_program(recorded, run.program_dir, has_flag(flags, "model") ? run.requested.model : "",
                                       run.requested.trust_program);
    // This folder's own copy, just checked: nothing to copy or hash again.
    const fs::path copy = fs::path(folder.path()) / recorded.value("file", "");
    std::error_code ec;
    if (fs::equivalent(run.requested.model, copy, ec)) {
      run.requested.model = copy.string();
      return recorded;
    }
  }
  if (!is_model_file(run.requested.model)) return nullptr;
  nlohmann::json program = folder.keep_program(run.requested.model);
  if (recorded.is_object()) {
    run.requested.model = (fs::path(folder.path()) / program["file"].get<std::string>()).string();
    program["from"] = recorded.value("from", program["from"].get<std::string>());  // where the user's file was
  }
  return program;
}

// Whether the run folder `dir` is empty or holds a run of `job`: a restart of a job continues
// only its own run, never one a refused first start found there.
bool written_by(const std::string& job, const std::string& dir) {
  const fs::path config = fs::path(dir) / "config.json";
  std::error_code ec;
  if (!fs::exists(config, ec)) return true;
  try {
    std::ifstream in(config);
    return !job.empty() && nlohmann::json::parse(in).value("job", "") == job;
  } catch (const std::exception&) {
    return false;  // unreadable: the normal start says what is wrong with the folder
  }
}

// The run after the ranks have met: where it starts, the Session, the run folder and the fit.
// `training` turns true when the fit begins.
int train(const std::vector<FlagArg>& flags, const RankEnv& ranks, const std::shared_ptr<Comm>& comm, Continued run,
          Clock::time_point run_start, bool& training) {
  const bool root = ranks.rank == 0;
  const std::string resume = run.requested.resume;
  // --resume PATH continues in that run's folder unless --output_dir names another.
  if (!resume.empty() && resume != "auto") run = continue_from(resume, flags);
  if (run.requested.output_dir.empty()) run.requested.output_dir = default_run_dir(run.requested);
  if (root) {  // before the run folder is touched
    const PathFlag out{"--export", run.requested.export_path};
    refuse_outputs_over_inputs({out}, input_files(run.requested));
    refuse_output_in_run(out, run.requested.output_dir);
  }

  std::unique_ptr<RunFolder> owned;
  if (root) owned = std::make_unique<RunFolder>(run.requested.output_dir);
  StartPoint from = root ? owned->plan_start(resume) : StartPoint{};
  if (comm) {
    // Rank 0 chose where the run starts; every rank loads that checkpoint (one node, or a shared
    // file system).
    from.checkpoint = comm->share("start", from.checkpoint);
    from.branch = comm->share("branch", from.branch ? "1" : "") == "1";
  }
  if (comm) from.recorded = comm->share("recorded", from.recorded);
  if (resume == "auto" && !from.checkpoint.empty()) run = continue_from(from.checkpoint, flags);
  // No checkpoint left: the folder's own job (its config.json, flags given now win) starts
  // again from the beginning, never the default preset.
  if (resume == "auto" && from.checkpoint.empty() && !from.recorded.empty()) run = restart_recorded(from.recorded, flags);
  if (from.branch) run.branched_from = fs::weakly_canonical(from.checkpoint).string();  // continued here
  run.requested.resume.clear();  // a run's record must not point at a checkpoint
  const bool allow_data_change = run.requested.allow_data_change;
  run.requested.allow_data_change = false;  // this resume's permission, not the run's setting
  // A model from a file trains from the run's own copy (train/run_program.h); the other ranks
  // load rank 0's (one node, or a shared file system, as for checkpoints).
  const nlohmann::json program = root ? use_kept_program(*owned, run, flags) : nlohmann::json();
  if (comm) run.requested.model = comm->share("model", run.requested.model);
  // Now, not after the run, and before the report: --export /dev/stdout sends it to stderr.
  // Rank 0's alone (another node may not see rank 0's disk).
  if (root && !run.requested.export_path.empty()) {
    if (const int fd = own_descriptor(run.requested.export_path); ranks.world_size > 1 && (fd == 1 || fd == 2))
      throw usage_error("--export " + run.requested.export_path + " with " + std::to_string(ranks.world_size) +
                            " ranks: the launcher mixes every rank's lines into its output",
                        "export to a file, e.g. --export model.safetensors");
    check_writable(run.requested.export_path, "export file");
  }

  SessionOptions options;  // (designated initializers here set off a false GCC 12 -Wmaybe-uninitialized)
  options.mesh.ranks = ranks;
  options.mesh.comm = comm;
  options.pinned = run.pinned;
  options.amp_fallback = run.amp_fallback;
  // On another number of ranks the run keeps its global batch, so its steps per epoch, its
  // schedule and its order of samples go on as they would have; sizes given now win.
  if (!from.checkpoint.empty() && run.world_size != ranks.world_size && !has_flag(flags, "rank_batch_sizes")) {
    run.requested.rank_batch_sizes.clear();  // they named the old ranks
    if (!has_flag(flags, "batch_size")) options.keep_global_batch = run.global_batch_size;
  }
  options.init_weights = from.checkpoint.empty();  // a resume's weights are its checkpoint's
  Session s(run.requested, options);
  if (root) print_session(s);
  const Config& c = s.config();
  FitOptions fit_options;
  if (!c.until.empty()) {
    fit_options.target = parse_target(c.until);  // the Session checked it applies
    fit_options.target->eval_every = c.eval_every;
  }
  check_steps_fit(s);
  // Best evaluation so far: finite (checkpoints hold it) and below any real score.
  CheckpointMeta at{.best_score = -1e300};
  if (!from.checkpoint.empty()) {
    try {
      at = load_checkpoint(from.checkpoint, s.trainer(), ranks.rank);  // refusals before any write
    } catch (const Error& e) {
      // A checkpoint that does not fit the model or optimizer this resume built: most often a
      // flag changed since the run began (--width, --optimizer), which the file's own message
      // cannot know. Named here, with the way out.
      ResumeChanges changed;
      if (run.record.is_object())
        compare_flags(read_config_record(run.record).requested, s.config_record()["requested"], changed,
                      program.is_null() ? "" : "model");
      if (changed.said.empty()) throw;
      std::vector<std::string> problems = e.problems;
      problems.push_back("this resume changes " + join(changed.said, "; ") +
                         ": a checkpoint loads only into the model and optimizer its run built");
      throw Error(problems,
                  "drop the changed flags to continue the run, or start a new run from its weights: --init_from " +
                      from.checkpoint + " --output_dir NEW_FOLDER",
                  kExitUsage);
    }
    // A rank that cannot load (a shard file that it alone reads is missing or damaged) refuses
    // the job (run_training): the others hear it in this meeting, not after --dist_timeout in the
    // first collective.
    if (comm) {
      comm->gather("checkpoint loaded", "");
      comm->share("checkpoints loaded", "");
    }
  }
  const CheckpointMeta loaded = at;  // as the file holds it (a resume may move the step position)
  // A position past the end of the epoch would skip the rest of it in silence.
  if (!from.checkpoint.empty() && at.samples > static_cast<int64_t>(s.data().train->size()))
    throw usage_error(fmt::format("checkpoint '{}' stands at sample {} of an epoch of {} training samples", from.checkpoint,
                                  at.samples, s.data().train->size()),
                      "the checkpoint is damaged or from other data; use another checkpoint of the run");
  // The epoch's order is one permutation whatever the ranks; each micro-batch takes the next
  // global batch of it, split over the ranks. The new ranks continue after the samples trained
  // (a remainder short of one new global batch, after a change of global batch, is skipped).
  std::string resharded;
  const int64_t global = s.global_batch_size();
  if (!from.checkpoint.empty() && at.samples > 0 &&
      (run.world_size != ranks.world_size || run.global_batch_size != global)) {
    resharded = run.world_size != ranks.world_size
                    ? fmt::format("world size {} -> {}: re-sharded the epoch after its first {} samples", run.world_size,
                                  ranks.world_size, at.samples)
                    : fmt::format("global batch {} -> {}: the epoch goes on after its first {} samples",
                                  run.global_batch_size, global, at.samples);
    if (at.samples % global != 0)
      resharded += fmt::format(", skipping the {} up to the next global batch of {}",
                               first_global_batch(at.samples, global) * global - at.samples, global);
  }

  // What this resume changes: said in the resume line, kept in config.json's history. The step
  // position follows the epoch's, unless --max_steps lays the schedule over steps.
  ResumeChanges changes;
  if (!from.checkpoint.empty() && (c.max_steps == 0 || c.max_steps >= s.steps_per_epoch() * c.epochs))
    recount_steps({s.steps_per_epoch(), batches_per_epoch(static_cast<int64_t>(s.data().train->size()),
                                                          s.train_loader_options()),
                   global, c.accumulation_steps},
                  recorded_samples_per_step(run.record), at, changes);

  nlohmann::json record = s.config_record();
  if (root) {
    record["data"] = data_fingerprint(c, static_cast<int64_t>(s.data().train->size()),
                                      static_cast<int64_t>(s.data().test->size()));
    record["schema"] = schema_of(*s.data().train).to_json();
    // A program's path moves with its run folder; its bytes are what must not change (checked).
    if (!run.record.is_null())
      compare_flags(read_config_record(run.record).requested, record["requested"], changes,
                    program.is_null() ? "" : "model");
    if (!from.checkpoint.empty()) {
      compare_data(run.record.value("data", nlohmann::json()), record["data"], allow_data_change, from.checkpoint, changes);
      compare_schema(run.record.value("schema", nlohmann::json()), record["schema"], changes);
    }
  }
  record["history"] = run.record.is_object() ? run.record.value("history", nlohmann::json::array()) : nlohmann::json::array();
  if (const auto entry = changes.entry(at); !entry.is_null()) record["history"].push_back(entry);
  if (!run.branched_from.empty()) record["branched_from"] = run.branched_from;
  if (!run.amp_fallback.empty()) record["amp_fallback"] = run.amp_fallback;
  record["world_size"] = ranks.world_size;
  record["global_batch_size"] = s.global_batch_size();
  if (!s.init_report().record.is_null()) record["init_from"] = s.init_report().record;
  if (!program.is_null()) record["program"] = program;
  // Tied weights' other names, for `export` (which writes a checkpoint's weights under them).
  for (const auto& [alias, own] : family(s.config().model).tied) record["tied_weights"][alias] = own;
  if (!ranks.job.empty()) record["job"] = ranks.job;  // what a restart of this job looks for
  if (!root) {
    training = true;
    return fit(s, nullptr, at, record, run_start, fit_options).stop.signal() ? exit_code_for_signal(stop_signal()) : 0;
  }
  RunFolder& folder = *owned;
  folder.start(record, c.tensorboard, c.monitor_interval, s.parallel().node_gpus(s.recipe(), s.machine()));
  fmt::print("output: {}\nmonitor: {}\n", folder.path(), folder.monitor().status());
  if (!s.batch_search().is_null()) folder.write(s.batch_search());
  if (!s.init_report().record.is_null()) folder.write(s.init_report().record);
  if (from.checkpoint.empty() && !changes.said.empty())  // the recorded job, started again
    fmt::print("changed from the recorded job: {}\n", join(changes.said, "; "));
  if (!from.checkpoint.empty()) {
    fmt::print("resumed from {}: epoch {}, batch {}, step {}{}{}{}\n", from.checkpoint, at.epoch + 1,
               first_global_batch(at.samples, global),
               at.step, resharded.empty() ? "" : " (" + resharded + ")",
               at.shard_reads.empty() ? "" : "; rank 0 read " + at.shard_reads,
               changes.said.empty() ? "" : "; changed: " + join(changes.said, "; "));
    nlohmann::json event = {{"event", "resume"},          {"step", at.step},   {"epoch", at.epoch},
                            {"samples", at.samples},        {"checkpoint", from.checkpoint}};
    if (!resharded.empty()) event["resharded"] = resharded;
    if (!changes.kept.empty()) event["changed"] = changes.kept;
    // A finished run says so (the fit loop has nothing to do; the summary is written again).
    const int64_t total = c.max_steps > 0 ? std::min(c.max_steps, s.steps_per_epoch() * c.epochs)
                                          : s.steps_per_epoch() * c.epochs;
    const bool early = c.early_stopping > 0 && at.evals_since_best >= c.early_stopping;
    const auto& target = fit_options.target;
    const bool reached = target && at.last_eval.count(target->metric) && target->reached(at.last_eval.at(target->metric));
    const bool done = at.epoch >= c.epochs || (at.step >= total && (at.samples == 0 || at.evaluated));
    if (reached || early || done) {
      event["finished"] = true;
      fmt::print("the run is finished ({}): nothing left to train; {}\n",
                 reached ? fmt::format("its last evaluation reached {}: test {} {:.4f}", target->text(), target->metric,
                                       at.last_eval.at(target->metric))
                 : early ? fmt::format("early stopping after {} evaluations without a better test {}",
                                       at.evals_since_best, s.monitored())
                         : fmt::format("step {} of {}", at.step, total),
                 reached ? "give --until a harder target (or --until '') to train on"
                 : early ? "raise --early_stopping to train on"
                         : "raise --epochs or --max_steps to train on");
    }
    folder.write(event);
    // A crash between the saves after an evaluation: the files still missing are that state.
    if (resume == "auto")
      for (const auto& name : folder.complete_saves(from.checkpoint, loaded, c.save_checkpoints))
        fmt::print("{}: copied from {} (the saves after step {}'s evaluation were cut short)\n",
                   folder.checkpoint_path(name), from.checkpoint, loaded.step);
  }

  training = true;
  FitResult r;
  try {
    r = fit(s, &folder, at, record, run_start, fit_options);
  } catch (const std::exception& e) {
    folder.status().set_state("failed", e.what());
    throw;
  }
  if (r.stop) return r.stop.signal() ? exit_code_for_signal(stop_signal()) : 0;

  const std::string& monitored = s.monitored();
  RunTotals totals{.step = r.step,
                   .epoch = r.last_epoch,
                   .steps_this_session = r.step - r.first_step,
                   .samples_per_step = s.global_batch_size() * c.accumulation_steps,
                   .skipped_steps = r.skipped_steps,
                   .bad_samples = s.data().bad_samples(),
                   .wall_seconds = std::chrono::duration<double>(Clock::now() - run_start).count(),
                   .train_seconds = r.train_seconds,
                   .wait_seconds = r.wait_seconds,
                   .profiled_steps = r.profiled_steps,
                   .profiled_seconds = r.profiled_seconds};
  const double best = EvalResult::higher_is_better(monitored) ? r.best_score : -r.best_score;
  nlohmann::json summary = summary_record(totals, monitored, best, r.last_eval, r.last_ema_eval);
  // Why the run ended before its epochs: in the summary, status.json and the closing line.
  const std::string ended_by =
      r.target_reached ? "target " + fit_options.target->text() + " reached" : r.early_stopped ? "early stopping" : "";
  if (r.early_stopped) summary["early_stopped"] = true;
  if (fit_options.target) {
    summary["target"] = fit_options.target->text();
    summary["target_reached"] = r.target_reached;
  }
  if (!ended_by.empty()) summary["ended_by"] = ended_by;
  if (s.recipe().cuda)
    summary["peak_memory_bytes"] = cuda_peak_allocated(s.recipe().device.index());
  else
    summary["peak_rss_bytes"] = peak_rss_bytes();
  summary["monitor"] = folder.monitor().finish();
  folder.write(summary);
  print_telemetry(summary["monitor"]);
  folder.write_report();
  if (!c.export_path.empty()) export_weights(s, record.dump(), r.step);
  folder.status().update({{"step", r.step}, {"epoch", r.last_epoch + 1}, {"eta_seconds", 0.0}});  // done: nothing left
  folder.status().set_state("finished", ended_by);
  print_summary(summary, monitored, c, folder.path());
  return 0;
}

}  // namespace

int run_training(const std::vector<FlagArg>& flags) {
  // The time limit counts from the process's start, as a job scheduler's does (loading LibTorch
  // takes a noticeable part of a short limit). Capped: a shell that ran something else before
  // exec-ing gputrain started the process earlier, and that time is not ours.
  const double loading = std::min(10.0, seconds_since_process_start());
  const auto run_start =
      Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(loading));
  install_stop_handlers();  // first: a signal during set-up stops after the first step
  // Data parallel: every rank trains; rank 0 alone owns the run folder and prints.
  const RankEnv ranks = read_rank_env();
  // --resume PATH takes the recipe from its checkpoint: no GPU query (a CUDA context on each GPU)
  // to choose one.
  const bool resume_path = std::any_of(flags.begin(), flags.end(), [](const FlagArg& f) {
    return f.name == "resume" && f.value && !f.value->empty() && *f.value != "auto";
  });
  GpuProbe probe;
  FingerprintProbe fingerprint;  // auto prefers a recipe measured on this machine
  if (!resume_path) {
    probe = [] { return probe_machine().gpus; };
    fingerprint = machine_fingerprint;
  }
  Continued run{resolve_config(flags, probe, fingerprint), nullptr, "", "", 1, 0, nullptr, ""};
  // --export /dev/stdout: the stream carries the weights alone, the report goes to stderr from
  // its first line on.
  if (ranks.rank == 0 && own_descriptor(run.requested.export_path) == 1) keep_stdout_for_data();
  // A job started again by its scheduler (torchrun --max_restarts, a Slurm requeue) continues
  // its run: the same command line must not refuse the folder it wrote the first time.
  if (ranks.restart_count > 0 && run.requested.output_dir.empty() && run.requested.resume.empty())
    throw usage_error(fmt::format("restart {} of this job has no --output_dir to find its run in (each start would "
                                  "make a new runs/<time> folder)", ranks.restart_count),
                      "give the job's command line --output_dir");
  if (run.requested.resume.empty() && ranks.restart_count > 0 && written_by(ranks.job, run.requested.output_dir)) {
    run.requested.resume = "auto";
    if (ranks.rank == 0)
      fmt::print("restart {} of this job ({}): continuing with --resume auto\n", ranks.restart_count,
                 ranks.source == "slurm" ? "SLURM_RESTART_COUNT" : "TORCHELASTIC_RESTART_COUNT");
  }
  std::shared_ptr<Comm> comm;
  if (ranks.world_size > 1) comm = std::make_shared<Comm>(ranks, run.requested.dist_timeout);
  bool training = false;
  try {
    return train(flags, ranks, comm, std::move(run), run_start, training);
  } catch (const Error& e) {
    // A rank that cannot start (rank 0's folder locked by another run, a bad file on one node)
    // tells the others, which are waiting for it at a meeting of the set-up or in their first
    // collective: every rank then exits with its one line and code. Once training, the ranks
    // agree at log steps instead.
    if (comm && !training) comm->refuse(e);
    throw;
  } catch (const std::exception& e) {  // from LibTorch or the file system: the same, exit 1
    if (comm && !training) comm->refuse(runtime_error(e.what()));
    throw;
  }
}

}  // namespace gputrain
