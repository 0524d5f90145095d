// The run folder: a run's files and their rules. It is created (or reopened to resume) once,
// holds config.json, metrics.jsonl (+ TensorBoard events), monitor.csv, checkpoints/ and
// report.html, and is the one place that knows their names.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "monitor/metrics.h"
#include "monitor/sampler.h"
#include "monitor/tensorboard.h"
#include "train/checkpoint.h"

namespace gputrain {

// runs/<date-time>-<preset>: where a run goes without --output_dir.
std::string default_run_dir(const Config& c);

// The checkpoint a --resume names: auto = <output_dir>/checkpoints/last.pt, or "" when that does
// not exist yet (the first session of a run started with --resume auto); else the path itself.
std::string resume_checkpoint(const Config& c);

class RunFolder {
 public:
  // Opens `dir` for a new run (a usage error when it already holds one) or, `resuming`, for
  // the run it holds. Removes torn temporary checkpoints. Nothing is written yet.
  RunFolder(const std::string& dir, bool resuming, bool tensorboard);

  const std::string& path() const { return dir_; }
  std::string checkpoint_path(const std::string& name) const;

  // config.json, written atomically (tmp, fsync, rename).
  void write_config(const nlohmann::json& record);
  // Opens metrics.jsonl and starts the monitor: the run has begun.
  void start(double monitor_interval, int gpu_index);
  // One metrics.jsonl record; step and eval records go to TensorBoard too.
  void write(const nlohmann::json& record);
  Monitor& monitor() { return *monitor_; }

  // The checkpoint `name` (last.pt, best.pt, epoch-N.pt); returns the seconds the save took.
  double save_checkpoint(const std::string& name, Trainer& trainer, const CheckpointMeta& meta);
  void prune_checkpoints(int64_t keep);

  // report.html; a failure is a warning, never the run's failure (`gputrain report` retries).
  void write_report();

 private:
  std::string dir_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<Monitor> monitor_;
};

}  // namespace gputrain
