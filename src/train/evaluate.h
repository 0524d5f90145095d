// Evaluation on a held-out split: mean loss and accuracy (or MAE for regression), no gradients.
#pragma once
#include "data/loader.h"
#include "train/trainer.h"

namespace gputrain {

struct EvalResult {
  double loss = 0;      // cross-entropy, or mean squared error for regression
  double accuracy = 0;  // classification
  double mae = 0;       // regression: mean absolute error over every target value
  bool regression = false;
  int64_t samples = 0;
};

EvalResult evaluate(Trainer& trainer, Loader& loader);

}  // namespace gputrain

namespace gputrain {
// What "best" means for checkpoints: accuracy, or the negated loss for regression (higher is better).
inline double eval_score(const EvalResult& r) { return r.regression ? -r.loss : r.accuracy; }
}  // namespace gputrain
