// Mixed precision as a run decided it. One value, owned by the run (the Session's Recipe) and
// read by reference by the step and the pipeline stages at every forward: the AMP fallback
// changes it in that one place, and the next step already sees the change.
#pragma once
#include <string>

#include <c10/core/ScalarType.h>

namespace gputrain {

struct Precision {
  bool amp = false;                     // forwards run under autocast
  c10::ScalarType dtype = c10::kFloat;  // autocast's dtype (kFloat when amp is off)
  bool scaler = false;                  // fp16 gradients need loss scaling; bf16 ones do not
  std::string why;                      // the device report's line for it
};

}  // namespace gputrain
