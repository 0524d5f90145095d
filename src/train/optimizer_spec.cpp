// The run's optimizer flags as an OptimizerSpec (optimizer_spec.h).
#include "train/optimizer_spec.h"

namespace gputrain {

OptimizerSpec optimizer_spec(const Config& c, bool fused) {
  OptimizerSpec s;
  // The flag's values are checked where flags are parsed: sgd, adam or adamw.
  s.kind = c.optimizer == "sgd" ? OptimizerKind::kSGD : c.optimizer == "adam" ? OptimizerKind::kAdam : OptimizerKind::kAdamW;
  s.lr = c.lr;
  s.weight_decay = c.weight_decay;
  s.momentum = c.momentum;
  s.nesterov = c.nesterov;
  s.beta1 = c.beta1;
  s.beta2 = c.beta2;
  s.fused = fused;
  return s;
}

}  // namespace gputrain
