// Evaluation on a held-out split: mean loss and accuracy, no gradients.
#pragma once
#include "data/loader.h"
#include "train/trainer.h"

namespace gputrain {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  int64_t samples = 0;
};

EvalResult evaluate(Trainer& trainer, Loader& loader);

}  // namespace gputrain
