// Parallelism composed around the Session, the step and the fit loop, from the process's Mesh
// (data-parallel ranks x pipeline stages): the values it decides, the wrappers it puts around the
// step (gradient sum, synchronized BatchNorm, the pipeline), and what the ranks must agree on at
// log steps. One process with one device composes nothing, and every call here is then a no-op
// or the local value.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/resolved.h"
#include "core/device_probe.h"
#include "core/recipe.h"
#include "data/loader.h"
#include "data/make_dataset.h"
#include "parallel/mesh.h"
#include "step/trainer.h"
#include "train/checkpoint.h"
#include "train/stop_reason.h"

namespace gputrain {

class DataParallelHooks;
class Pipeline;

// The first batch of the training data in order, on the main thread, `batch_size` samples (the
// Session's; null when the data has none): what the probes that time or check a step run on.
using FirstBatch = std::function<std::optional<Batch>(int64_t batch_size)>;

class Parallelism {
 public:
  explicit Parallelism(Mesh mesh);
  ~Parallelism();

  const Mesh& mesh() const { return mesh_; }
  Comm* comm() const { return mesh_.comm.get(); }  // null in one process

  // Session, before the recipe: this rank's device and batch size (its share of `keep_global`
  // when a run continues on another number of ranks), the pipeline's micro-batches, and the
  // switches that do not combine with ranks or stages, as decisions for the Session to record.
  Decisions plan(const ResolvedConfig& rc, const MachineInfo& machine, int64_t keep_global = 0);
  // Session, after the recipe: connects the ranks' collectives on the run's device.
  void connect(const Config& c, Recipe& recipe);
  // Session, with the model built: `trainer`'s stages cut and placed, every rank on rank 0's
  // weights, --balance auto, and the gradient sum and synchronized BatchNorm around the step.
  void compose(Trainer& trainer, const DataSplits& data, const FirstBatch& first_batch, ResolvedConfig& rc,
               Recipe& recipe, const MachineInfo& machine);

  // This rank's share of the training data, in the loader's options.
  void shard(LoaderOptions& o) const;
  // Samples in one micro-batch over all ranks (--batch_size x ranks, or the sum of their sizes).
  int64_t global_batch_size(int64_t batch_size) const;
  // The GPUs this node's ranks train on: what rank 0's monitor reads.
  std::vector<int> node_gpus(const Recipe& recipe, const MachineInfo& machine) const;

  // Fit loop, at a step where the ranks check for a stop. Why to stop now: `local` alone in one
  // process; with several ranks, any rank's reason, else none. `every` goes in as this rank's
  // proposal for the steps until the next check and comes back as rank 0's, the same on all.
  StopReason agree_stop(const StopReason& local, int64_t& every) const;
  // Whether any rank's `local` is true (all ranks call it at the same point).
  bool any(bool local) const;
  // The loss of a log window (every rank's, weighted by its share: the job's), with the ranks'
  // batch, step and all-reduce times and the stages' busy fractions added to the step record and
  // the progress line's tail.
  double log_window(const torch::Tensor& loss_sum, int64_t window_steps, int64_t batch_size, double step_ms,
                    nlohmann::json& record, std::string& tail) const;
  // Every rank's generator states into a checkpoint's meta (a collective; rank 0 writes them).
  void gather_rng(CheckpointMeta& meta, const Trainer& trainer) const;
  // --shard, at a save (a collective): every rank writes its shard file beside rank 0's
  // `checkpoint_path` (given on rank 0 alone); returns the index for that checkpoint on rank 0,
  // "" on the others. Throws when any rank could not write its file.
  std::string save_shards(const std::string& checkpoint_path, Trainer& trainer) const;
  // The run's parallel layout as a metrics record (null when there is nothing to report).
  nlohmann::json layout_record(Trainer& trainer, const std::string& schedule) const;
  // Host seconds the step waited for the gradient sum since the last call.
  double take_comm_seconds() const;
  // The pipeline stages (null without them), owned by the Trainer's step once composed.
  Pipeline* pipeline() const { return pipeline_; }

 private:
  Mesh mesh_;
  std::vector<int64_t> rank_batch_sizes_;  // --rank_batch_sizes, parsed; empty when equal
  torch::Device device_ = torch::kCPU;     // where the collectives reduce (the run's device)
  std::string time_limit_;                 // --time_limit, for a stop another rank asked for
  DataParallelHooks* hooks_ = nullptr;     // owned by the Trainer once composed
  mutable int64_t shard_saves_ = 0;             // sharded saves so far: each meets under keys of its own
  Pipeline* pipeline_ = nullptr;           // owned by the Trainer once composed

  struct Planning;
  void plan_stages(Planning& rc);
  std::vector<torch::Device> stage_devices(const Config& c, const Recipe& recipe, const MachineInfo& machine) const;
  void make_stages(Trainer& trainer, const FirstBatch& first_batch, const Config& c, Recipe& recipe);
  void balance(Trainer& trainer, const FirstBatch& first_batch, ResolvedConfig& rc, Recipe& recipe);
  // --shard: the optimizer updates this rank's slices of the gradient sum's buckets.
  void shard_optimizer(Trainer& trainer, const Config& c, Recipe& recipe);
};

}  // namespace gputrain
