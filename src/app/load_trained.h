// A trained model for `eval` and `infer`: a Session built from the checkpoint's own requested
// configuration (< flags), its decided values pinned (normalization statistics), and its weights.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "config/flag_arg.h"
#include "train/checkpoint.h"
#include "train/session.h"

namespace gputrain {

struct Trained {
  std::unique_ptr<Session> session;
  CheckpointMeta meta;
};

// Flags override the stored configuration (another --test_file, --device, --eval_batch_size).
// Device-dependent values (device, AMP, threads) are decided again on this machine.
Trained load_trained(const std::string& checkpoint, const std::vector<FlagArg>& flags);

}  // namespace gputrain
