// Writing a torch.save zip (data.pkl, byteorder, data/<key> storages) through LibTorch's own
// zip writer, so that torch.load reads it like a file torch.save made.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

#include "weights/pickle_writer.h"

namespace gputrain {

// Finishes `pickle` and writes the archive to `sink` (called with each piece in order; returns
// the bytes it took). Each storage is copied to the CPU one at a time, so a GPU run needs host
// memory for its largest tensor only.
void write_torch_save(PickleWriter& pickle, const std::function<size_t(const void*, size_t)>& sink);

}  // namespace gputrain
