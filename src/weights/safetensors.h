// Model weights in the safetensors format (loadable by Python's safetensors / torch state dicts).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

namespace gputrain {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;
using Metadata = std::map<std::string, std::string>;

// Writes `tensors` (any device, dtype and memory format: each is stored as a contiguous CPU
// copy, so channels_last weights come out as plain NCHW) with "format": "pt" plus `metadata`
// in the header's __metadata__. Atomic: a temporary file, fsync, rename. An output path that
// cannot be created is a usage error (exit 2) naming it.
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

// Every parameter and buffer of `model` under the names torch gives them
// ("layer1.0.conv1.weight", "bn1.running_mean", "bn1.num_batches_tracked").
NamedTensors model_tensors(const torch::nn::Module& model);

// `tensors` with each tied weight's other names beside its own, as state_dict lists a shared
// parameter: `tied` holds (another name, the name in `tensors`). safetensors cannot alias, so
// each name is written with its copy.
NamedTensors with_tied_names(NamedTensors tensors, const std::vector<std::pair<std::string, std::string>>& tied);

// Reads a safetensors file with strict checks (header length against the file size, known
// dtypes, shapes matching their byte spans, offsets in bounds, contiguous, not overlapping).
// A bad file is a usage error (exit 2) naming the file and what is wrong with it.
std::map<std::string, torch::Tensor> load_safetensors(const std::string& path, Metadata* metadata = nullptr);

// Fails early (usage error, exit 2) when `path` cannot be written, so a long run does not
// discover it only at the end. Leaves no file behind.
void check_writable(const std::string& path, const std::string& what);

}  // namespace gputrain
