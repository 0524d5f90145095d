// Loads a trained model for `eval` and `infer`: the checkpoint's own configuration (< flags),
// its data pipeline (with the normalization the run stored) and its weights.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/device.h"
#include "data/make_dataset.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace gputrain {

struct Trained {
  Config config;
  RunContext ctx;
  DataSplits data;
  std::unique_ptr<Trainer> trainer;
  CheckpointMeta meta;
};

// Flags override the stored configuration (another --test_file, --device, --eval_batch_size).
// With --device auto and several GPUs, the one with the most free memory is used.
Trained load_trained(const std::string& checkpoint, const std::vector<FlagArg>& flags);

// The loader over a split in order (no shuffle, every sample), `batch_size` per batch.
LoaderOptions inference_loader_options(const Trained& t, int64_t batch_size);

}  // namespace gputrain
