// The AMP numeric check: before a run trains in mixed precision, a few steps on one batch are
// taken in fp32 and in the autocast dtype from the same weights and compared. A non-finite
// loss or gradient, a loss beyond tolerance or a gradient norm far from fp32's means this model and data do not train
// safely in that dtype; the Session then falls back (fp16 -> bf16 where the device has it ->
// fp32) and the device report says why.
#pragma once
#include <string>

#include <c10/core/ScalarType.h>

#include "data/loader.h"
#include "step/trainer.h"

namespace gputrain {

struct AmpCheckOptions {
  int steps = 3;                // comparisons, each after an SGD step on the fp32 gradient
  double lr = 0;                // that step's learning rate (the run's): the check sees moving weights
  int64_t max_samples = 16;     // of the batch (fp32 activations must fit where fp16 ones did)
  double loss_tolerance = 0.05;  // relative difference of the loss
  double grad_ratio_tolerance = 2;  // the gradient's norm within [1/x, x] times fp32's
};

struct AmpCheckResult {
  bool ok = true;
  // Failed: what went wrong, in a few words. Passed: the largest differences measured.
  std::string summary;
  double loss_diff = 0;   // largest relative difference of the loss over the steps
  double grad_ratio = 1;  // the gradient norm's ratio to fp32's farthest from 1
  int64_t samples = 0;                  // the check ran on this many samples of the batch
};

// `scaled`: fp16 with loss scaling, as training would run it (the scale halves from 65536
// until the gradients are finite; below 1 they overflow fp16 even unscaled). The weights,
// buffers, gradients and random generators are left as they were. Out of memory halves the
// samples; with one sample still too many, the check passes with a note (it cannot judge).
AmpCheckResult check_amp(Trainer& trainer, const Batch& batch, c10::ScalarType dtype, bool scaled,
                         AmpCheckOptions options = {});

}  // namespace gputrain
