// Length bucketing: a shuffled epoch reordered so that each batch holds samples of similar
// length, since a batch of varying-length samples (texts) is padded to its longest. As Hugging
// Face Trainer's group_by_length: each window of consecutive samples of the shuffled order is
// sorted by length, longest first (an out-of-memory shows at the window's first batch), so every
// sample is still seen once per epoch, in an order that changes with the epoch. The window is
// counted in samples, not batches: the order does not depend on the batch size, so a resume with
// another --batch_size continues the epoch with the samples it has not seen.
#pragma once
#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace gputrain {

// Reorders `order` (a shuffled epoch of `data`) in windows of `window` samples. A step's
// samples over every rank are a run of consecutive samples (data/loader.cpp), so the ranks of a
// step get similar lengths too. Samples of unknown length (sample_length -1) leave the order as
// it is.
void bucket_by_length(std::vector<int64_t>& order, int64_t window, const Dataset& data);

// The share of padded positions in batches of `batch` consecutive samples of `order`:
// 1 - tokens / (sum over batches of samples x longest).
double padding_share(const std::vector<int64_t>& order, int64_t batch, const Dataset& data);

}  // namespace gputrain
