// Checkpoints: model, optimizer, grad scaler, progress and config in one file, written atomically.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

#include "parallel/comm.h"
#include "train/checkpoint_file.h"
#include "step/trainer.h"

namespace gputrain {

// Every rank's generator states; a collective: all ranks call it at the same point.
RankRng gather_rank_rng(Comm& comm, const Trainer& trainer);

// Writes format 3 (torch.save's layout: torch.load(path, weights_only=True) reads it, and its
// "model" dict loads into the family's PyTorch twin) to "<path>.tmp", fsyncs it, renames it over
// `path` and fsyncs the folder, so a crash leaves either the old file or the new one. A sharded
// optimizer's state is in shard files the ranks wrote before (train/shard_checkpoint.h): `shards`
// is their index, and the file holds the optimizer's groups alone.
void save_checkpoint(const std::string& path, Trainer& trainer, const CheckpointMeta& meta,
                     const std::string& shards = "");

// Restores the model, optimizer, scaler and RNG state of `trainer` from a checkpoint of any
// format (1 and 2 read as data, never run); throws a usage error for a missing, corrupt or
// foreign file, before anything of `trainer` changes. Rank `rank` > 0 takes its own row of the saved ranks'
// generators; one the checkpoint has none for (a run with fewer ranks) keeps its own seeding.
CheckpointMeta load_checkpoint(const std::string& path, Trainer& trainer, int rank = 0);

// Reads only the metadata (to recover a run's configuration before building anything).
CheckpointMeta read_checkpoint_meta(const std::string& path);

// The run's configuration record that `meta` (read from `path`) holds, as JSON; a usage error
// naming the file when it holds none.
nlohmann::json checkpoint_record(const std::string& path, const CheckpointMeta& meta);

// What an export needs from a checkpoint, read in one pass, on the CPU: the metadata, and the
// model's parameters and buffers named as Module::named_parameters / named_buffers name them
// ("layer1.0.conv1.weight"), raw and as their moving average (empty when the run kept no EMA).
// Needs no model and no data: an export works on a machine with neither the dataset nor a GPU.
struct CheckpointWeights {
  CheckpointMeta meta;
  NamedTensors raw, ema;
};
CheckpointWeights read_checkpoint_weights(const std::string& path);

// Deletes all but the newest `keep` epoch-N.pt files in `dir`.
void prune_checkpoints(const std::string& dir, int64_t keep);

// True when every floating tensor a checkpoint holds (weights, buffers, EMA, optimizer moments)
// is finite: checked before each save. Sharded (--shard), every rank must call it: each checks
// the slices it holds and they agree.
bool all_finite(Trainer& trainer);

}  // namespace gputrain
