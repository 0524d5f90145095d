// `gputrain consolidate`: a sharded checkpoint (--shard) made one file, its optimizer state whole
// again, as an unsharded run writes it (torch.load reads it; any run resumes from it).
#pragma once
#include <string>

namespace gputrain {

// Reads checkpoint `in` and its shard files and writes the whole checkpoint to `out` (atomically;
// `out` may be `in`). Returns a line saying what was written. A bad file: a usage error naming it.
std::string consolidate_checkpoint(const std::string& in, const std::string& out);

}  // namespace gputrain
