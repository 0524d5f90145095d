// Evaluation on a held-out split: sums stay on the device and are read once at the end.
#include "train/evaluate.h"

#include "train/autocast.h"
#include "train/loss.h"

namespace gputrain {

EvalResult evaluate(Trainer& trainer, Loader& loader) {
  torch::NoGradGuard no_grad;
  auto& model = trainer.model();
  const auto& ctx = trainer.context();
  model.eval();
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().device(ctx.device));
  torch::Tensor correct = torch::zeros({}, torch::TensorOptions().device(ctx.device).dtype(torch::kLong));
  torch::Tensor abs_sum = torch::zeros({}, torch::TensorOptions().device(ctx.device));
  bool regression = false;
  int64_t n = 0;
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    AutocastGuard autocast(ctx.amp, ctx.device.type(), ctx.amp_dtype);
    auto out = model.forward(b->x).to(torch::kFloat);
    loss_sum += task_loss(out, b->y, 0, /*sum=*/true);
    regression = b->y.scalar_type() != torch::kLong;
    if (regression) abs_sum += (out.reshape(b->y.sizes()) - b->y).abs().sum() / b->y.size(1);
    else correct += out.argmax(1).eq(b->y).sum();
    n += b->y.size(0);
  }
  model.train();
  EvalResult r;
  r.samples = n;
  if (n > 0) {
    r.loss = loss_sum.item<double>() / n;
    r.regression = regression;
    if (regression) r.mae = abs_sum.item<double>() / n;
    else r.accuracy = static_cast<double>(correct.item<int64_t>()) / n;
  }
  return r;
}

}  // namespace gputrain
