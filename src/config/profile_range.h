// --profile START:STOP, the steps the profiler records (monitor/profiler.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace gputrain {

struct ProfileRange {
  int64_t start = 0, stop = 0;  // steps start+1 .. stop, counted from 1
  bool shapes = false;          // ":shapes": ops.csv per operator and input shapes
  // "10:15" or "10:15:shapes"; nullopt for anything else (START >= 0, STOP > START).
  static std::optional<ProfileRange> parse(const std::string& text);
  std::string text() const;  // "10:15", "10:15:shapes"
};

}  // namespace gputrain
