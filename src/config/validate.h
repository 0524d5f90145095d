// Validation of a merged Config, every problem at once. Its own unit because the range and choice
// checks walk the field table (config/fields.h), which is built over the Config struct: in
// config/config it would make the struct and its table include each other.
#pragma once
#include <string>
#include <vector>

#include "config/config.h"

namespace gputrain {

// Range, choice and cross-field problems, one line each; empty when the config is valid.
std::vector<std::string> config_problems(const Config& c);

}  // namespace gputrain
