// `gputrain export`: a checkpoint's weights as safetensors, without the model or the data.
#pragma once
#include <string>

namespace gputrain {

struct ExportRequest {
  std::string checkpoint, out;
  std::string weights = "auto";  // auto (the EMA when the run kept one) | ema | raw
  bool allow_non_finite = false;  // write NaN or inf weights anyway (to inspect a diverged run)
  std::string format = "safetensors";  // safetensors (a file) | hf (a Hugging Face folder, for gpt)
};

// Returns the process exit code.
int run_export(const ExportRequest& request);

}  // namespace gputrain
