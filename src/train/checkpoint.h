// Checkpoints: model, optimizer, grad scaler, progress and config in one file, written atomically.
#pragma once
#include <string>

#include "train/trainer.h"

namespace gputrain {

struct CheckpointMeta {
  int64_t epoch = 0;  // epochs completed
  int64_t step = 0;   // optimizer steps completed
  std::string config_json;
};

// Writes to "<path>.tmp", fsyncs it, renames it over `path` and fsyncs the folder, so a crash
// leaves either the old file or the new one, never a torn one.
void save_checkpoint(const std::string& path, Trainer& trainer, const CheckpointMeta& meta);

// Restores the model, optimizer and scaler of `trainer`; throws a usage error for a missing,
// corrupt or foreign file.
CheckpointMeta load_checkpoint(const std::string& path, Trainer& trainer);

}  // namespace gputrain
