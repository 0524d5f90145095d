// `gputrain models`: every registered model with its parameter count for one input shape.
#include "models/model_table.h"

#include <c10/util/Exception.h>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "models/registry.h"

namespace gputrain {
void print_model_table(const Config& c) {
  const auto shape = parse_shape(c.input_shape);  // validated with the config
  const int64_t outputs = c.num_classes > 0 ? c.num_classes : 10;
  fmt::print("models for samples of shape {} with {} outputs:\n", shape_text(shape), outputs);
  fmt::print("  {:<12} {:<16} {}\n", "model", "input", "parameters");
  for (const auto& name : model_names()) {
    std::string count;
    try {
      count = with_commas(parameter_count(*make_model(name, model_spec(c, shape, outputs))));
    } catch (const Error& e) {
      count = "n/a: " + e.problems.front();
    } catch (const c10::Error& e) {
      count = "n/a: " + std::string(e.what_without_backtrace());
    } catch (const std::exception& e) {
      count = "n/a: " + std::string(e.what());
    }
    // A rank mismatch is the common case; say it briefly.
    if (count.rfind("n/a: model '", 0) == 0) count = "n/a: needs " + family(name).input;
    fmt::print("  {:<12} {:<16} {}\n", name, family(name).input, count);
  }
}

}  // namespace gputrain
