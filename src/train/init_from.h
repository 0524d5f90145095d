// --init_from: a model's start from trained weights (safetensors, a torch.save state_dict, a
// gputrain checkpoint), matched by name and shape, with one report of what was loaded.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "models/family.h"
#include <optional>

#include "weights/hf_gpt2.h"
#include "weights/hf_llama.h"

namespace gputrain {

class Net;

struct InitWeights {
  std::string path;
  std::string format;  // "safetensors", "torch.save", "gputrain checkpoint"
  std::string wrapper;                // "state_dict" when the weights sat under that key
  std::vector<std::string> stripped;  // prefixes removed from every name ("module.")
  std::vector<std::pair<std::string, torch::Tensor>> tensors;  // on the CPU, in gputrain's names
  // A Hugging Face GPT-2 folder or a nanoGPT checkpoint: the model's shape (width 0: none),
  // from `shape_from` (its config.json, its model_args). vocab 0: the file does not say the
  // data's vocabulary (nanoGPT pads its own).
  GptShape gpt;
  std::optional<LlamaShape> llama;  // a Hugging Face Llama folder: the rest of its shape (gpt holds the base)
  std::string shape_from;
};

// Reads `path` whatever its format (detected from its bytes, not its name), strips the
// wrappers' prefixes and maps `f`'s PyTorch-twin names to gputrain's. `ema`: a gputrain
// checkpoint's (or a timm checkpoint's) moving average instead of its raw weights. A file that
// is not a weights file, or a damaged one, is a usage error naming it.
InitWeights read_init_weights(const std::string& path, const Family& f, bool ema);

// The stem the file's first convolution implies for a family with a stem ("imagenet" for a
// 7x7 conv1, "small" for 3x3), and why; empty when it says nothing.
std::pair<std::string, std::string> stem_from_weights(const InitWeights& w, const Family& f);

struct InitReport {
  nlohmann::json record;           // {"event": "init_from", ...}: for metrics.jsonl and config.json
  std::vector<std::string> lines;  // the printed block
};

// Copies the file's tensors into `model` by name. The head (f.head) may differ in shape (a new
// --num_classes): it keeps its fresh start. Any other missing, misshapen, mistyped or unknown
// name is a usage error listing the first few with the closest names, unless !strict.
InitReport load_init_weights(Net& model, const Family& f, const InitWeights& w, bool strict);

}  // namespace gputrain
