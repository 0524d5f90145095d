// Shard lists as WebDataset users write them: brace ranges and sets, then shell globs.
#pragma once
#include <string>
#include <vector>

namespace gputrain {

// Expands "train-{000000..000127}.tar" (a zero-padded range), "{a,b}" (a set) and globs (*, ?,
// [..]) into the files they name, in order: ranges and sets in their order, each glob's matches
// sorted. A name without glob characters must exist. Throws usage_error naming the pattern:
// malformed braces, a glob with no match, a missing file, more than 1,000,000 names.
std::vector<std::string> expand_shards(const std::string& pattern);

}  // namespace gputrain
