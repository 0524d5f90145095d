// Sharded checkpoints (--shard): the optimizer's state lives in pieces spread over the ranks
// (step/optimizer.h). At a save each rank writes its own pieces' state to a shard file, a
// safetensors file under <checkpoints>/shards/<save id>/, and rank 0's checkpoint names them in
// an index (its optimizer's "gputrain_shards"). No rank ever holds the whole state. A load on
// any number of ranks, sharded or not, takes from the shard files the parts of the pieces it
// needs, keyed by (parameter, element offset), so a run reshards on resume.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "models/registry.h"
#include "step/optimizer.h"
#include "train/optimizer_state.h"
#include "weights/safetensors.h"  // NamedTensors

namespace gputrain {

// What rank 0 tells every rank before a sharded save: where the shard files go, under which id.
struct ShardSave {
  std::string folder;  // <checkpoints>/shards/<id>, absolute
  std::string id;      // random per save: a shard file from another save or run is refused
  int world = 1;
};

// A fresh save's id and folder for the checkpoint at `checkpoint_path`.
ShardSave new_shard_save(const std::string& checkpoint_path, int world);

// The shard file of `rank` in a save's folder.
std::string shard_file(const std::string& folder, int rank, int world);

// Writes this rank's pieces' state (fused step counts brought up to date first) to its shard file,
// atomically.
void write_shard_file(const ShardSave& save, int rank, Optimizer& optimizer);

// This rank's pieces as JSON text ([[position, offset, length], ...], its shard file's list).
std::string shard_pieces(Optimizer& optimizer);

// The index rank 0's checkpoint keeps for a save (JSON text): the id, the folder relative to the
// checkpoint's, the files with each one's pieces (`file_pieces`: every rank's shard_pieces), and
// every parameter's name and size by position.
std::string shard_index(const ShardSave& save, const std::string& checkpoint_path, Optimizer& optimizer,
                        const Net& model, const std::vector<std::string>& file_pieces);

// The optimizer's groups alone, over the whole parameters (no per-parameter state): what a
// sharded checkpoint's own optimizer record holds.
OptimizerState optimizer_groups(Optimizer& optimizer);

// The state for `optimizer` (sharded: its pieces, by piece position; else its parameters) from
// a checkpoint's optimizer record `stored`, read from `checkpoint_path`, whose per-parameter
// state is either in it or, sharded, in the shard files its index names. The result goes to
// apply_optimizer_state. A missing shard file, one from another save, or pieces that do not cover
// what they should: an error naming the file.
// `reads`, when given, counts the shard files opened (a load opens those holding its pieces).
struct ShardReads {
  int read = 0, files = 0;
};
OptimizerState state_for(Optimizer& optimizer, const OptimizerState& stored, const std::string& checkpoint_path,
                         ShardReads* reads = nullptr);

// The whole state, every parameter's, of a checkpoint's record (read from `checkpoint_path`),
// shaped as the checkpoint's weights `model` (by the names its index gives each position): what
// `gputrain consolidate` writes. Unsharded records come back as they are.
OptimizerState consolidated_state(const OptimizerState& stored, const std::string& checkpoint_path,
                                  const NamedTensors& model);

// The shard folders (absolute) the checkpoints in `dir` name; null when one of them cannot be
// read (it might name any).
std::optional<std::vector<std::string>> referenced_shard_folders(const std::string& dir);
// Before a checkpoint `from` is copied to `to` in another folder: the shard files it names,
// copied to where the copy will name them (nothing for an unsharded checkpoint).
void copy_shards(const std::string& from, const std::string& to);
// Removes <dir>/shards/* folders no checkpoint in `dir` names (a crashed save's, a replaced one's).
void remove_unreferenced_shards(const std::string& dir);

}  // namespace gputrain
