// Evaluation on a held-out split: sums stay on the device and are read once at the end.
#include "train/evaluate.h"

#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/metric.h"
#include "core/autocast.h"
#include "step/head_loss.h"

namespace gputrain {

double EvalResult::mean_mae() const {
  return mae.empty() ? 0 : std::accumulate(mae.begin(), mae.end(), 0.0) / static_cast<double>(mae.size());
}
double EvalResult::mean_rmse() const {
  return rmse.empty() ? 0 : std::accumulate(rmse.begin(), rmse.end(), 0.0) / static_cast<double>(rmse.size());
}

std::string EvalResult::resolve(const std::string& name) const {
  if (name != "auto") return name;
  return regression ? "loss" : "accuracy";
}

void EvalResult::require_finite(const std::string& what, const std::string& hint) const {
  if (!interrupted && !std::isfinite(loss))
    throw Error({fmt::format("the {} loss is not finite ({})", what, loss)}, hint, kExitNonFinite);
}

bool EvalResult::higher_is_better(const std::string& name) {
  const Metric* m = find_metric(name);
  return m && m->higher_is_better;
}

double EvalResult::metric(const std::string& name) const {
  const std::string n = resolve(name);
  const Metric* m = find_metric(n);
  // top5 < 0: fewer than 5 classes (the evaluation measures it where it applies).
  if (!m || !metric_misfit(*m, regression, top5 < 0 ? 0 : 5).empty() || (n == "f1" && f1 < 0))
    throw usage_error("monitor_metric '" + n + "' does not apply to this " +
                          (regression ? std::string("regression") : std::string("classification")) + " task",
                      regression ? "use loss, mae or rmse"
                                 : "use loss or accuracy (top5 needs 5 classes or more; f1 a label per sample)");
  if (n == "loss") return loss;
  if (n == "accuracy") return accuracy;
  if (n == "top5") return top5;
  if (n == "f1") return f1;
  return n == "mae" ? mean_mae() : mean_rmse();
}

std::map<std::string, double> EvalResult::metrics() const {
  std::map<std::string, double> out;
  for (const auto& name : metric_names())
    if (metric_misfit(*find_metric(name), regression, top5 < 0 ? 0 : 5).empty() && (name != "f1" || f1 >= 0))
      out[name] = metric(name);
  return out;
}

void EvalResult::add_to(nlohmann::json& record, const std::string& prefix) const {
  record[prefix + "loss"] = loss;
  if (regression) {
    record[prefix + "mae"] = mean_mae();
    record[prefix + "rmse"] = mean_rmse();
    if (mae.size() > 1) {
      record[prefix + "mae_per_target"] = mae;
      record[prefix + "rmse_per_target"] = rmse;
    }
  } else {
    record[prefix + "accuracy"] = accuracy;
    if (top5 >= 0) record[prefix + "top5"] = top5;
    if (f1 >= 0) record[prefix + "f1"] = f1;
    if (tokens > 0) {
      record[prefix + "tokens"] = tokens;
      record[prefix + "perplexity"] = std::exp(loss);  // of the mean loss per token, as language models report it
    }
  }
}

std::string EvalResult::summary_line() const {
  if (regression) {
    std::string s = fmt::format("loss {:.4f} | mae {:.4f} | rmse {:.4f}", loss, mean_mae(), mean_rmse());
    if (mae.size() > 1) {
      s += " | mae per target";
      for (double m : mae) s += fmt::format(" {:.4g}", m);
    }
    return s;
  }
  if (tokens > 0)
    return fmt::format("loss {:.4f} | perplexity {:.2f} | token accuracy {:.4f} ({} tokens)", loss, std::exp(loss), accuracy,
                       tokens);
  std::string s = fmt::format("loss {:.4f} | {} {:.4f}", loss, multilabel ? "exact-match accuracy" : "accuracy", accuracy);
  if (top5 >= 0) s += fmt::format(" | top-5 {:.4f}", top5);
  if (f1 >= 0) s += fmt::format(" | macro-F1 {:.4f}", f1);
  return s;
}

EvalResult evaluate(Trainer& trainer, Loader& loader, const std::function<bool()>& stop, Comm* comm) {
  torch::NoGradGuard no_grad;
  auto& model = trainer.model();
  const auto& ctx = trainer.context();
  model.eval();
  auto on = torch::TensorOptions().device(ctx.device);
  torch::Tensor loss_sum = torch::zeros({}, on), correct = torch::zeros({}, on.dtype(torch::kLong)),
                correct5 = torch::zeros({}, on.dtype(torch::kLong)), tokens = torch::zeros({}, on.dtype(torch::kLong)),
                abs_sum, sq_sum, per_class;  // per_class: [3, classes] of hits, predictions, labels (macro-F1)
  EvalResult r;
  r.multilabel = trainer.loss().kind == "bce";
  bool has_top5 = false;  // top-5 means something with 5 classes or more
  // A batch's hits, predictions and labels per class into per_class.
  const auto count_classes = [&](const torch::Tensor& hits, const torch::Tensor& predicted, const torch::Tensor& labelled) {
    auto counts = torch::stack({hits, predicted, labelled}).to(torch::kLong);
    per_class = per_class.defined() ? per_class + counts : counts;
  };
  // One output and its targets into the sums.
  const auto tally = [&](const torch::Tensor& out, const torch::Tensor& y) {
    loss_sum += task_loss(out, y, trainer.loss(), /*sum=*/true);
    r.regression = y.scalar_type() != torch::kLong && !r.multilabel;
    if (per_token(y)) {  // top-1 and top-5 over the counted tokens
      const auto counted = y.ne(kIgnoreIndex);
      tokens += counted.sum();
      correct += out.argmax(-1).eq(y).logical_and(counted).sum();
      has_top5 = out.size(-1) >= 5;
      if (has_top5) correct5 += std::get<1>(out.topk(5, -1)).eq(y.unsqueeze(-1)).any(-1).logical_and(counted).sum();
    } else if (r.multilabel) {  // a label is on where its logit is above 0 (probability 0.5)
      const auto predicted = out.reshape(y.sizes()).gt(0), labelled = y.gt(0.5);
      correct += predicted.eq(labelled).all(1).sum();
      count_classes(predicted.logical_and(labelled).sum(0), predicted.sum(0), labelled.sum(0));
    } else if (r.regression) {
      auto err = out.reshape(y.sizes()) - y;  // [B, T]: per-target sums
      abs_sum = abs_sum.defined() ? abs_sum + err.abs().sum(0) : err.abs().sum(0);
      sq_sum = sq_sum.defined() ? sq_sum + err.square().sum(0) : err.square().sum(0);
    } else {
      const auto predicted = out.argmax(1);
      correct += predicted.eq(y).sum();
      const int64_t classes = out.size(1);
      // scatter_add, not bincount: no wait on the device. A label outside the classes (-100:
      // none) counts nowhere.
      const auto labelled = y.ge(0).logical_and(y.lt(classes)).to(torch::kLong), at = y.clamp(0, classes - 1);
      const auto per = [&](const torch::Tensor& index, const torch::Tensor& add) {
        return torch::zeros({classes}, add.options()).scatter_add_(0, index, add);
      };
      count_classes(per(at, predicted.eq(y).to(torch::kLong) * labelled), per(predicted, torch::ones_like(predicted)),
                    per(at, labelled));
      has_top5 = out.size(1) >= 5;
      if (has_top5) correct5 += std::get<1>(out.topk(5, 1)).eq(y.unsqueeze(1)).any(1).sum();
    }
  };
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    if (stop && stop()) {
      r.interrupted = true;
      break;
    }
    AutocastGuard autocast(ctx.precision.amp, ctx.device.type(), ctx.precision.dtype);
    // A language model's logits a chunk of tokens at a time (step/head_loss.h): a whole
    // evaluation batch's would not fit.
    const auto head = per_token(b->y()) ? model.forward_head(*b) : HeadInput{};
    if (head.defined())
      for_each_logits_chunk(head, b->y(), tally);
    else
      tally(model.forward_batch(*b).to(torch::kFloat), b->y());
    r.samples += b->samples();
  }
  model.train();
  if (comm && !r.interrupted) {
    // A rank may have no sample of its own (a test set smaller than the world): what the task
    // is and how many targets it has come with the counts, then the sums.
    const bool saw = abs_sum.defined(), saw_classes = per_class.defined();
    auto counts = torch::tensor({r.samples, int64_t{r.regression}, int64_t{has_top5}, int64_t{saw},
                                 saw ? abs_sum.numel() : int64_t{0}, int64_t{saw_classes},
                                 saw_classes ? per_class.size(1) : int64_t{0}});
    comm->all_reduce_sum(counts)->wait();
    r.samples = counts[0].item<int64_t>();
    r.regression = counts[1].item<int64_t>() > 0;
    has_top5 = counts[2].item<int64_t>() > 0;
    if (r.regression && !saw) {
      const int64_t targets = counts[4].item<int64_t>() / std::max<int64_t>(counts[3].item<int64_t>(), 1);
      abs_sum = torch::zeros({targets}, on);
      sq_sum = torch::zeros({targets}, on);
    }
    const bool any_classes = counts[5].item<int64_t>() > 0;
    if (any_classes && !saw_classes)
      per_class = torch::zeros({3, counts[6].item<int64_t>() / counts[5].item<int64_t>()}, on.dtype(torch::kLong));
    std::vector<torch::Tensor> sums = {loss_sum, correct, correct5, tokens};
    if (r.regression) sums.insert(sums.end(), {abs_sum, sq_sum});
    if (any_classes) sums.push_back(per_class);
    comm->all_reduce_sum(sums);
  }
  if (r.samples == 0 || r.interrupted) return r;
  r.tokens = tokens.item<int64_t>();
  const double n = static_cast<double>(r.tokens > 0 ? r.tokens : r.samples);
  r.loss = loss_sum.item<double>() / n;
  if (r.regression) {
    auto mae = (abs_sum / n).cpu(), mse = (sq_sum / n).cpu();
    for (int64_t t = 0; t < mae.numel(); ++t) {
      r.mae.push_back(mae[t].item<double>());
      r.rmse.push_back(std::sqrt(mse[t].item<double>()));
    }
  } else {
    r.accuracy = static_cast<double>(correct.item<int64_t>()) / n;
    if (has_top5) r.top5 = static_cast<double>(correct5.item<int64_t>()) / n;
    if (per_class.defined()) {
      const auto c = per_class.cpu().to(torch::kDouble);
      const auto hits = c[0], seen = c[1] + c[2];  // seen = 2·TP + FP + FN
      const auto f1 = torch::where(seen > 0, 2 * hits / seen.clamp_min(1), torch::zeros_like(seen));
      // One label per sample: the classes in the labels or the predictions; several: every label.
      const auto counted = r.multilabel ? torch::ones_like(seen) : seen.gt(0).to(torch::kDouble);
      r.f1 = (f1 * counted).sum().item<double>() / std::max(counted.sum().item<double>(), 1.0);
    }
  }
  return r;
}

}  // namespace gputrain
