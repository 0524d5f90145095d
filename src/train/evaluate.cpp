// Evaluation on a held-out split: sums stay on the device and are read once at the end.
#include "train/evaluate.h"

#include <torch/nn/functional/loss.h>

#include "train/autocast.h"

namespace gputrain {

EvalResult evaluate(Trainer& trainer, Loader& loader) {
  torch::NoGradGuard no_grad;
  auto& model = trainer.model();
  const auto& ctx = trainer.context();
  model.eval();
  auto sum = torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum);
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().device(ctx.device));
  torch::Tensor correct = torch::zeros({}, torch::TensorOptions().device(ctx.device).dtype(torch::kLong));
  int64_t n = 0;
  loader.start_epoch(0);
  while (auto host = loader.next()) {
    Batch b = trainer.to_device(*host);
    AutocastGuard autocast(ctx.amp, ctx.device.type(), ctx.amp_dtype);
    auto logits = model.forward(b.x).to(torch::kFloat);
    loss_sum += torch::nn::functional::cross_entropy(logits, b.y, sum);
    correct += logits.argmax(1).eq(b.y).sum();
    n += b.y.size(0);
  }
  model.train();
  EvalResult r;
  r.samples = n;
  if (n > 0) {
    r.loss = loss_sum.item<double>() / n;
    r.accuracy = static_cast<double>(correct.item<int64_t>()) / n;
  }
  return r;
}

}  // namespace gputrain
