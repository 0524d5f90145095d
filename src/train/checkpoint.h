// Checkpoints: model, optimizer, grad scaler, progress and config in one file, written atomically.
#pragma once
#include <string>

#include "core/error.h"

#include "parallel/comm.h"
#include "train/trainer.h"

namespace gputrain {

// Data parallel: every rank's generator states, row r for rank r, so that each rank resumes its
// own random stream (the ranks draw different dropout masks).
struct RankRng {
  torch::Tensor cpu, cuda;  // [world size, state bytes]; cuda only on GPUs
};

// Where a run stands, counted so that any world size can continue it: the samples of the epoch
// already trained, in the epoch's global order (one permutation per epoch whatever the ranks;
// each micro-batch takes the next global batch of it, split over the ranks).
struct CheckpointMeta {
  int64_t epoch = 0;      // the epoch to continue (all earlier ones are complete)
  int64_t samples = 0;    // samples of that epoch already trained (0 at an epoch boundary)
  int64_t step = 0;       // optimizer steps completed
  double best_score = 0;  // the monitored metric's best value, signed so that higher is better
  std::string config_json;
  int64_t evals_since_best = 0;  // for --early_stopping
  RankRng rank_rng;              // written when set (several ranks); not read back into the meta
  // The evaluation at this position has run: a --max_steps end inside an epoch, evaluated; a
  // resume with more steps continues from here, one with the same steps has nothing left to do.
  bool evaluated = false;
};

// The checkpoint format: 2 counts the position in samples (1 counted micro-batches of the
// run's own global batch, which the config record inside it holds: read as samples).
inline constexpr int kCheckpointVersion = 2;

// A checkpoint from a newer gputrain: refused, never passed over as damaged.
struct NewerCheckpoint : Error {
  using Error::Error;
};

// Every rank's generator states; a collective: all ranks call it at the same point.
RankRng gather_rank_rng(Comm& comm, const Trainer& trainer);

// Writes to "<path>.tmp", fsyncs it, renames it over `path` and fsyncs the folder, so a crash
// leaves either the old file or the new one, never a torn one.
void save_checkpoint(const std::string& path, Trainer& trainer, const CheckpointMeta& meta);

// Restores the model, optimizer, scaler and RNG state of `trainer`; throws a usage error for a
// missing, corrupt or foreign file. Rank `rank` > 0 takes its own row of the saved ranks'
// generators; one the checkpoint has none for (a run with fewer ranks) keeps its own seeding.
CheckpointMeta load_checkpoint(const std::string& path, Trainer& trainer, int rank = 0);

// Reads only the metadata (to recover a run's configuration before building anything).
CheckpointMeta read_checkpoint_meta(const std::string& path);

// What an export needs from a checkpoint, read in one pass, on the CPU: the metadata, and the
// model's parameters and buffers named as Module::named_parameters / named_buffers name them
// ("layer1.0.conv1.weight"), raw and as their moving average (empty when the run kept no EMA).
// Needs no model and no data: an export works on a machine with neither the dataset nor a GPU.
struct CheckpointWeights {
  CheckpointMeta meta;
  std::vector<std::pair<std::string, torch::Tensor>> raw, ema;
};
CheckpointWeights read_checkpoint_weights(const std::string& path);

// Deletes all but the newest `keep` epoch-N.pt files in `dir`.
void prune_checkpoints(const std::string& dir, int64_t keep);

// True when every floating tensor a checkpoint holds (weights, buffers, EMA, optimizer moments)
// is finite: checked before each save and after each load.
bool all_finite(Trainer& trainer);

}  // namespace gputrain
