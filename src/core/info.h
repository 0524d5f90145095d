// `gputrain info` and `--version`: what this binary was built with and what the machine has.
#pragma once
#include <string>

namespace gputrain {

// "gputrain 0.1.0 (LibTorch 2.15.0, CUDA 13.2, cuDNN 9.10.2)".
std::string version_line();

// The device query as aligned text, or as one JSON object.
void print_info(bool as_json);

}  // namespace gputrain
