// A checkpoint file written and read as plain data, whatever its format: format 3 is a torch.save zip (a
// pickle of dicts, numbers, strings and tensors); formats 1 and 2 were archives LibTorch wrote
// as TorchScript, read here as records without compiling or running any of their code.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "core/error.h"
#include "weights/safetensors.h"  // NamedTensors
#include "train/optimizer_state.h"

namespace gputrain {

// The checkpoint format. 3: torch.save's layout, readable by torch.load(weights_only=True);
// 2 counted the position in samples, 1 in micro-batches of the run's global batch (the config
// record inside it holds that batch: read as samples).
inline constexpr int kCheckpointVersion = 3;

// What to tell a user whose checkpoint cannot be loaded.
extern const char* const kDamagedCheckpointHint;

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
  RankRng rank_rng;              // written when set (several ranks)
  // The evaluation at this position has run: a --max_steps end inside an epoch, evaluated; a
  // resume with more steps continues from here, one with the same steps has nothing left to do.
  bool evaluated = false;
  // The metrics of the last evaluation (the moving average's when kept: what is judged), by
  // name ("accuracy", "loss"); empty before the first. A resume checks --until against them.
  std::map<std::string, double> last_eval;
  // Set by load_checkpoint, never stored: the shard files this rank read of a sharded
  // checkpoint's ("1 of the 2 shard files"), empty for an unsharded one.
  std::string shard_reads;
};

// A checkpoint from a newer gputrain: refused, never passed over as damaged.
struct NewerCheckpoint : Error {
  using Error::Error;
};

// Everything a checkpoint holds, on the CPU. Names are Module::named_parameters /
// named_buffers names ("layer1.0.conv1.weight").
struct CheckpointData {
  int version = kCheckpointVersion;
  CheckpointMeta meta;
  NamedTensors model, ema;  // ema: empty when the run kept no average
  OptimizerState optimizer;
  torch::Tensor scale, growth_tracker;  // the grad scaler's
  torch::Tensor rng_cpu, rng_cuda;      // this process's generators (rng_cuda: GPU runs only)
  NamedTensors step_state;              // the step hooks' (step/step_hooks.h): empty when none keeps any
};

// What to read. Every part's structure is always read and checked (a hostile file is refused
// whoever reads it); Meta leaves the tensors' bytes unread (shapes and dtypes only).
enum class CheckpointParts { Meta, All };

// Reads the checkpoint at `path`. A missing, damaged or foreign file, or one that would need
// code run to read it (a TorchScript class defining __setstate__ or __getstate__), is a usage
// error naming it; a newer format is NewerCheckpoint. Memory is bounded by twice the file's size
// (plus 4 MiB), and every walk over its structure is bounded in depth and visits each object once.
CheckpointData read_checkpoint_file(const std::string& path, CheckpointParts parts = CheckpointParts::All);

}  // namespace gputrain

namespace gputrain {

// Writes `c` in format 3 to `sink` (called with each piece in order; returns the bytes taken): a
// dict {"format", "meta", "model", "ema" (when kept), "optimizer" (PyTorch's state_dict layout),
// "scaler", "rng", "step_state" (when kept)} of numbers, strings and tensors, which
// torch.load(weights_only=True) reads.
void write_checkpoint(const CheckpointData& c, const std::function<size_t(const void*, size_t)>& sink);

}  // namespace gputrain
