// Turns torch's exceptions into gputrain errors.
#include "core/torch_errors.h"

#include <c10/util/Exception.h>

#include "core/error.h"

namespace gputrain {

int run_with_torch_errors(const std::function<int()>& body) {
  try {
    return body();
  } catch (const c10::OutOfMemoryError& e) {
    throw runtime_error("out of memory: " + std::string(e.what_without_backtrace()),
                        "lower --batch_size or raise --accumulation_steps");
  } catch (const c10::Error& e) {
    throw runtime_error(e.what_without_backtrace());
  }
}

}  // namespace gputrain
