// Opening a checkpoint file that may be damaged, before anything trusts what LibTorch read.
#pragma once
#include <string>

#include <torch/serialize/input-archive.h>

namespace gputrain {

// What to tell a user whose checkpoint cannot be loaded.
extern const char* const kDamagedCheckpointHint;

// Loads the archive at `path` onto `device`. First every zip member's CRC-32 is checked, then
// the file is loaded on the CPU with the size of every allocation recorded, and every tensor
// must lie inside its storage and every storage inside the buffer it really got (LibTorch
// trusts the file's sizes); a GPU run then loads it again to the device. A missing or damaged
// file is a usage error naming it; other failures are LibTorch's exceptions, for the caller to
// word.
torch::serialize::InputArchive open_checkpoint(const std::string& path, torch::Device device);

}  // namespace gputrain
