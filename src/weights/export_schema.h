// torch.export's serialization schema numbers its enums its own way (torch/_export/serde/
// schema.py), not as c10 does: the mappings, for the archive reader and the graph's arguments.
#pragma once
#include <cstdint>
#include <optional>

#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

namespace gputrain {

// The dense dtypes gputrain trains with; nullopt for complex, float8 and unknown ones.
inline std::optional<c10::ScalarType> export_scalar_type(int64_t v) {
  switch (v) {
    case 1: return c10::kByte;
    case 2: return c10::kChar;
    case 3: return c10::kShort;
    case 4: return c10::kInt;
    case 5: return c10::kLong;
    case 6: return c10::kHalf;
    case 7: return c10::kFloat;
    case 8: return c10::kDouble;
    case 12: return c10::kBool;
    case 13: return c10::kBFloat16;
    default: return std::nullopt;
  }
}

// Contiguous 1, ChannelsLast 2, ChannelsLast3d 3, Preserve 4.
inline std::optional<c10::MemoryFormat> export_memory_format(int64_t v) {
  switch (v) {
    case 1: return c10::MemoryFormat::Contiguous;
    case 2: return c10::MemoryFormat::ChannelsLast;
    case 3: return c10::MemoryFormat::ChannelsLast3d;
    case 4: return c10::MemoryFormat::Preserve;
    default: return std::nullopt;
  }
}

// Strided 7 (and sparse COO 1); the other sparse layouts are not trained here.
inline std::optional<c10::Layout> export_layout(int64_t v) {
  switch (v) {
    case 7: return c10::kStrided;
    case 1: return c10::kSparse;
    default: return std::nullopt;
  }
}

}  // namespace gputrain
