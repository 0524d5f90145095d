// The run folder: a run's files and their rules, in one place. One owner at a time (a lock held
// for the life of the process), where a run starts (fresh, or the newest intact checkpoint),
// config.json, metrics.jsonl (+ TensorBoard events), monitor.csv, checkpoints/ and report.html.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "monitor/metrics.h"
#include "monitor/sampler.h"
#include "monitor/tensorboard.h"
#include "train/checkpoint.h"
#include "train/status_file.h"

namespace gputrain {

// runs/<date-time>-<preset>: where a run goes without --output_dir.
std::string default_run_dir(const Config& c);

// Where a run starts in its folder.
struct StartPoint {
  std::string checkpoint;  // the checkpoint to load; "" for a fresh start
  bool branch = false;     // a checkpoint of another run, continued in a new folder
  // --resume auto on a folder whose run left no checkpoint: that run's config.json (moved aside
  // with its start), whose job starts again; "" when there was none.
  std::string recorded;
};

class RunFolder {
 public:
  // Takes `dir` for this process: creates it when missing and locks it, the lock held until the
  // process ends (the kernel releases it on any crash). Another process holding it is a usage
  // error naming the holder, and the folder is left as it was. A run that ends before start()
  // (refused, bad data, a model that cannot be built) takes away what it added: the folder is
  // as it found it.
  explicit RunFolder(const std::string& dir);
  ~RunFolder();
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  // Where the run starts, given --resume: "" for a new run (refused when the folder holds a
  // run), "auto" for the newest intact checkpoint (last.pt, else the newest epoch-N.pt; when the
  // folder holds only the start of a run that never saved one, that start is moved aside into
  // aborted-<time>/ and the run starts afresh), or a checkpoint's path (refused when the folder
  // holds a different run). Every refusal leaves the folder byte for byte as it was. Then
  // removes torn temporary files.
  StartPoint plan_start(const std::string& resume);

  const std::string& path() const { return dir_; }
  std::string checkpoint_path(const std::string& name) const;

  // The run begins: the TensorBoard folder, config.json (written atomically: tmp, fsync,
  // rename), metrics.jsonl, the monitor and status.json.
  // `gpus`: the GPUs the monitor reads (empty: host stats only).
  void start(const nlohmann::json& config_record, bool tensorboard, double monitor_interval, const std::vector<int>& gpus);
  // One metrics.jsonl record; step and eval records go to TensorBoard too.
  void write(const nlohmann::json& record);
  Monitor& monitor() { return *monitor_; }
  // status.json, from start() on.
  StatusFile& status() { return *status_; }

  // The checkpoint `name` (last.pt, best.pt, epoch-N.pt); returns the seconds the save took.
  double save_checkpoint(const std::string& name, Trainer& trainer, const CheckpointMeta& meta,
                         const std::string& shards = "");
  void prune_checkpoints(int64_t keep);
  // The run keeps its program (train/run_program.h): `model` copied in, its record returned. A
  // run that ends before start() takes the copies away again.
  nlohmann::json keep_program(const std::string& model);
  // The saves after an evaluation write epoch-N.pt, last.pt, then best.pt when it is the best so
  // far: a crash between them leaves some missing (or best.pt an older evaluation's), for good,
  // since the first one written already counts the evaluation as done and as the best. Resuming
  // from `from` (at `at`), the files of that evaluation still missing are copied from it, byte
  // for byte (they are the same state); a file that holds a later step is never replaced.
  // Returns their names. For --resume auto, which resumes the newest checkpoint.
  std::vector<std::string> complete_saves(const std::string& from, const CheckpointMeta& at, bool save_checkpoints);

  // report.html; a failure is a warning, never the run's failure (`gputrain report` retries).
  void write_report();

 private:
  std::string dir_;
  int lock_fd_ = -1;       // the flock'ed .lock file
  std::string old_note_;   // what .lock said before this run took it (put back if the run never starts)
  std::string lock_file_;  // the exclusive-create lock file where flock is refused
  // What this process added, taken away again when the run ends before start().
  bool created_dir_ = false, created_lock_ = false, created_checkpoints_ = false, started_ = false;
  std::vector<std::string> program_files_;  // the program copies this process wrote
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<Monitor> monitor_;
  std::unique_ptr<StatusFile> status_;

  void lock();
  bool holds_run() const;
};

}  // namespace gputrain
