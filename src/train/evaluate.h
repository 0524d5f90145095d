// Evaluation on a held-out split: the loss and the task's metrics, no gradients.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/loader.h"
#include "parallel/comm.h"
#include "step/trainer.h"

namespace gputrain {

struct EvalResult {
  bool interrupted = false;  // stopped early by a signal: no metrics
  bool regression = false;
  bool multilabel = false;        // several 0/1 labels per sample: accuracy is all of a sample's right
  int64_t samples = 0;
  int64_t tokens = 0;             // a class per token: the counted tokens, which the metrics average over
  double loss = 0;                // the training loss (cross-entropy, or the regression loss)
  double accuracy = 0;            // classification: top-1
  double top5 = -1;               // classification with at least 5 classes; -1 otherwise
  // Macro-F1 (classification with a label or several per sample; -1 for a label per token): the
  // mean over classes of 2·TP / (2·TP + FP + FN), over the classes in the labels or the
  // predictions (multi-label: every label, 0 for one neither has), as scikit-learn's
  // f1_score(average="macro").
  double f1 = -1;
  std::vector<double> mae, rmse;  // regression: per target value
  double mean_mae() const;
  double mean_rmse() const;

  // The value of a metric (loss, accuracy, top5, f1, mae, rmse) and whether higher is better.
  double metric(const std::string& name) const;
  static bool higher_is_better(const std::string& name);
  // Every metric that applies to this task, by name (what a checkpoint keeps of an evaluation).
  std::map<std::string, double> metrics() const;
  // A NaN or infinite loss (an fp16 overflow, diverged weights): the NaN guard's error, exit 3,
  // with `hint`.
  void require_finite(const std::string& what, const std::string& hint) const;
  // "auto" -> accuracy for classification, loss for regression.
  std::string resolve(const std::string& name) const;
  // The metrics as JSON fields prefixed by `prefix` (e.g. "test_"), and as one printable line.
  void add_to(nlohmann::json& record, const std::string& prefix) const;
  std::string summary_line() const;
};

// Evaluates over the whole loader; when `stop` (polled between batches) returns true, returns at
// once with `interrupted` set, so a signal during a long evaluation is not kept waiting.
// With `comm`, the loader holds this rank's shard: the sums are added over the ranks, and every
// rank gets the whole test set's metrics (a stop must then come from all ranks or none).
EvalResult evaluate(Trainer& trainer, Loader& loader, const std::function<bool()>& stop = {},
                    Comm* comm = nullptr);

}  // namespace gputrain
