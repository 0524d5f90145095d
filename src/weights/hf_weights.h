// The weights of a Hugging Face model folder, whatever save_pretrained wrote: model.safetensors,
// a sharded model.safetensors.index.json and its shards, or pytorch_model.bin.
#pragma once
#include <string>

#include "weights/safetensors.h"

namespace gputrain {

// The tensors under their file names. A folder without weights, an index that names a file
// outside the folder, or shards that disagree with their index is a usage error naming it.
NamedTensors read_hf_weights(const std::string& dir);

}  // namespace gputrain
