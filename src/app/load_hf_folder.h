// `generate --checkpoint DIR` where DIR is a Hugging Face folder (GPT-2 or Llama: config.json,
// safetensors, tokenizer.json or tokenizer.model): a Session for its model, as --init_from DIR
// builds one for training, with no data but the shape of a window of token ids.
#pragma once
#include <string>
#include <vector>

#include "app/load_trained.h"
#include "config/flag_arg.h"

namespace gputrain {

// The folder's model with its weights, and its tokenizer.json (or tokenizer.model) as the run's
// tokenizer. `flags` (--device, --use_amp) are added. A folder of another model type is a usage
// error naming it.
Trained load_hf_folder(const std::string& dir, const std::vector<FlagArg>& flags);

}  // namespace gputrain
