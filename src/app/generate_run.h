// `gputrain generate`: text from a trained language model, with a key-value cache.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/flag_arg.h"

namespace gputrain {

struct GenerateRequest {
  std::string checkpoint;
  std::vector<std::string> prompts;              // texts (--prompt, or --prompts FILE's lines)
  std::vector<std::vector<int64_t>> prompt_ids;  // --prompt_ids, instead of texts
  // Where each prompt (of prompts or prompt_ids) came from, for messages: "--prompts p.txt line 2".
  std::vector<std::string> origins;
  int64_t max_new_tokens = 256;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::vector<std::string> stops;  // --stop strings: a row ends before the first it writes
  bool json = false;               // one JSON line per prompt instead of the streamed text
  // --prompt_template: each prompt's ids start with the end-of-text token, as each example of
  // tools/prepare_text.py --instructions does.
  bool lead_with_end_of_text = false;
  std::vector<FlagArg> flags;      // --device and the like, over the checkpoint's configuration
};

// Returns the process exit code.
int run_generate(const GenerateRequest& request);

}  // namespace gputrain
