// `gputrain models`: every registered model with its parameter count for one input shape.
#pragma once
#include "config/config.h"

namespace gputrain {

// Prints one row per model for samples of c.input_shape and c.num_classes outputs; a model that
// cannot take the shape says so on its row.
void print_model_table(const Config& c);

}  // namespace gputrain
