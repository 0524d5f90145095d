// The Session: one run's pieces, built once from a requested Config, in one order, for every
// command: train, each benchmark variant, eval, infer, on every data-parallel rank. probe the
// machine -> plan the parallelism (train/parallelism.h) -> resolve the recipe -> apply the global
// switches -> data -> everything else that can be decided before training (task, loss, metric,
// normalization, stem) -> model, optimizer, scaler, EMA (the Trainer) -> parallelism composed
// around it -> AMP check -> auto batch size -> loader threads -> loaders on demand.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/resolved.h"
#include "core/device_probe.h"
#include "core/recipe.h"
#include "data/loader.h"
#include "data/make_dataset.h"
#include "parallel/mesh.h"
#include "train/init_from.h"
#include "train/parallelism.h"
#include "train/step_batches.h"
#include "step/trainer.h"

namespace gputrain {

struct SessionOptions {
  // Where this process sits in a data-parallel job (the loaders take every w-th sample from
  // rank r; gradients are summed by the ranks' collectives). Its collectives are connected, and
  // its pipeline stages' devices decided, as the Session is built (train/parallelism.h).
  Mesh mesh;
  // Data already loaded by an earlier Session with the same data flags (benchmark variants differ
  // only in speed switches, so they share one dataset).
  std::shared_ptr<const DataSplits> data;
  // The resolved half of the record of the run being continued or evaluated: values that were
  // decided from the data or by a search (normalization statistics, an auto batch size) stay
  // as that run decided them; what depends on the machine is decided again.
  nlohmann::json pinned;
  // --auto_batch_size searches only when a run trains; eval and infer keep the batch size.
  bool search_batch_size = true;
  // --amp_check runs only when a run trains (eval and infer take no gradient).
  bool check_amp = true;
  // The global batch of the run being continued on another number of ranks (0: none): each
  // rank's batch is its share, or the resume is refused where it does not divide.
  int64_t keep_global_batch = 0;
  // Why mixed precision failed earlier in the run being continued ("" if it did not): the
  // precision falls back again, without a new check of the one that failed.
  std::string amp_fallback;
  // The model starts from --init_from's weights (a fresh train or benchmark run; a resume, eval
  // and infer take the weights of their checkpoint instead).
  bool init_weights = false;
};

class Session {
 public:
  explicit Session(const Config& requested, SessionOptions options = {});

  const Config& requested() const { return rc_.requested; }
  const Config& config() const { return rc_.resolved; }  // what this run uses
  const ResolvedConfig& resolution() const { return rc_; }
  const MachineInfo& machine() const { return machine_; }
  const Recipe& recipe() const { return recipe_; }
  const DataSplits& data() const { return *data_; }
  std::shared_ptr<const DataSplits> shared_data() const { return data_; }
  Trainer& trainer() { return *trainer_; }
  // Data parallel and pipeline stages, as composed around this Session and its step.
  const Parallelism& parallel() const { return parallel_; }
  // Samples in one micro-batch over all ranks (--batch_size x ranks, or the sum of
  // --rank_batch_sizes).
  int64_t global_batch_size() const { return parallel_.global_batch_size(rc_.resolved.batch_size); }
  // Samples in one optimizer step over all ranks: the global batch x --accumulation_steps.
  int64_t samples_per_step() const { return global_batch_size() * rc_.resolved.accumulation_steps; }
  // Optimizer steps in one epoch of the training data (0 when one step needs more samples than it has).
  int64_t steps_per_epoch() const;
  // The metric that decides "best" and early stopping (monitor_metric with auto decided).
  const std::string& monitored() const { return rc_.resolved.monitor_metric; }
  // The --auto_batch_size search as a metrics.jsonl record (null when none ran).
  const nlohmann::json& batch_search() const { return batch_search_; }
  // --init_from's report: printed, in metrics.jsonl and config.json (empty without it).
  const InitReport& init_report() const { return init_report_; }
  // The parameters --freeze froze at the start (for --unfreeze_at_epoch).
  const std::vector<std::string>& frozen() const { return frozen_; }

  // Loader settings for training (shuffled, this rank's share) and for a pass in order.
  LoaderOptions train_loader_options() const;
  // The training batches for a benchmark's timed steps: whole batches, epochs without end (the
  // loader threads kept across them); `cycle_steps` > 0: that many steps' batches loaded once and
  // cycled (--stage compute).
  std::unique_ptr<StepBatches> benchmark_batches(int64_t cycle_steps = 0) const;
  // The first `batch_size` training samples in order, on the main thread, the same on every rank
  // (null when the data has none): what the AMP check and the stage and balance probes run on.
  std::optional<Batch> first_train_batch(int64_t batch_size) const;
  // The whole test set; `sharded`: this rank's share of it, each sample on one rank (the
  // sums are then reduced over the ranks, see evaluate()).
  LoaderOptions eval_loader_options(int64_t batch_size, bool sharded = false) const;

  // What this Session built, in one line (device, precision, memory format, data, model): every
  // command prints it, so the same run reads the same in train, eval, infer and benchmark.
  std::string describe_line() const;

  // Mixed precision failed `why` (during training: a collapsed loss scale): fp16 -> bf16 where
  // the device has it -> fp32, in the recipe's precision (which the step and the stages read)
  // and the resolution. Returns the new precision ("bf16" or "fp32").
  std::string fall_back_amp(const std::string& why);

  // config.json's record: {"requested", "resolved", "reasons"}.
  nlohmann::json config_record() const { return gputrain::config_record(rc_); }

 private:
  ResolvedConfig rc_;
  SessionOptions options_;
  // Before the Trainer, so that the Trainer (whose step hooks hold the job's Comm) goes first.
  Parallelism parallel_;
  MachineInfo machine_;
  Recipe recipe_;
  std::shared_ptr<const DataSplits> data_;
  std::unique_ptr<Trainer> trainer_;
  nlohmann::json batch_search_;
  // --init_from a Hugging Face folder: width, depth and heads decided by its config.json.
  void shape_from_weights(const InitWeights& w);
  // --model gpt or llama: width, depth, heads and positions decided (GPT-2 small's, --seq_len's),
  // and llama's key/value heads, MLP width, rotary base and norm epsilon.
  void decide_lm_shape();
  std::optional<InitWeights> init_weights_;  // read before the stem is decided, loaded into the model
  InitReport init_report_;
  std::vector<std::string> frozen_;
  torch::Tensor class_weights_;  // --class_weights, read from the data (train/class_weights.h)

  void pin(const nlohmann::json& pinned);
  void build_trainer();
  void resolve_from_data();
  void search_batch_size();
  void decide_accumulation();
  void choose_num_workers();  // --num_workers auto
  void decide_buckets();      // --bucket_window auto, and the padding share with and without buckets
  void check_precision();     // --amp_check
  void decide_attention_precision();  // --attention_precision auto: timed at the run's shape
  void settle_unused();       // what is still auto does not apply: n/a, with why
};

}  // namespace gputrain
