// --class_weights: a weight per class in the training loss, for data whose classes are
// unbalanced: cross-entropy's `weight`, or for several labels per sample (multi-label) BCE's
// `pos_weight`. The evaluation loss stays unweighted, so that runs with and without weights
// compare. With accumulation or several ranks, each micro-batch's weighted mean is weighed by its
// share of the step's samples, as a PyTorch loop with accumulation computes it (not one weighted
// mean over the whole step, whose weights' sum only the whole step knows).
#pragma once
#include <string>

#include <torch/types.h>

#include "data/dataset.h"

namespace gputrain {

// The weights `flag` asks for, float32 [classes] on the CPU; undefined when `flag` is empty.
//   balanced: counts the training labels, and gives class c n / (classes x count_c), as
//             scikit-learn's compute_class_weight("balanced"); multi-label: negatives / positives
//             of each label, as torch's BCEWithLogitsLoss documentation suggests. A class with no
//             sample is a usage error (its weight would be infinite).
//   w0,w1,...: one positive weight per class (label).
// A usage error for regression, a per-token target, or a list of the wrong length.
torch::Tensor class_weights(const std::string& flag, const Dataset& train);

}  // namespace gputrain
