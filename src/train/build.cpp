// Builds what a Config asks for, the same way for `train` and `benchmark`.
#include "train/build.h"

#include "core/error.h"
#include "train/optim.h"

namespace gputrain {

void check_model_options(const Config& c) {
  auto problems = model_option_problems(c);
  if (!problems.empty()) throw Error(problems, "drop the options the model does not use", kExitUsage);
}

std::string check_task_options(const Config& c, const Dataset& train) {
  const bool regression = train.is_regression();
  const std::string metric = c.monitor_metric == "auto" ? (regression ? "loss" : "accuracy") : c.monitor_metric;
  std::vector<std::string> problems;
  if (regression && (metric == "accuracy" || metric == "top5"))
    problems.push_back("monitor_metric '" + metric +
                       "' is for classification; this data is regression (use loss, mae or rmse)");
  if (!regression && (metric == "mae" || metric == "rmse"))
    problems.push_back("monitor_metric '" + metric +
                       "' is for regression; this data is classification (use loss or accuracy)");
  if (!regression && metric == "top5" && train.num_classes() < 5)
    problems.push_back("monitor_metric 'top5' needs 5 classes or more; this data has " +
                       std::to_string(train.num_classes()));
  if (!regression && c.loss != "auto")
    problems.push_back("--loss " + c.loss + " is for regression; classification trains with cross-entropy");
  if (regression && c.label_smoothing > 0)
    problems.push_back("--label_smoothing is for classification; this data is regression");
  if (!problems.empty()) throw Error(problems, "see --task to change how the targets are read", kExitUsage);
  return metric;
}

std::unique_ptr<Trainer> build_trainer(const Config& c, const RunContext& ctx, const Dataset& train_data) {
  check_model_options(c);
  // Regression models output one value per target.
  const int64_t outputs = train_data.is_regression() ? train_data.target_numel() : train_data.num_classes();
  NetPtr model = make_model(c.model, model_spec(c, train_data.sample_shape(), outputs));
  model->to(ctx.device);
  if (ctx.channels_last) to_channels_last(*model);
  auto optimizer = make_optimizer(c, *model);  // after the moves: it must hold the final tensors
  return std::make_unique<Trainer>(
      model, std::move(optimizer), ctx,
      TrainerOptions{c.accumulation_steps, c.clip_max_norm, {c.loss, c.label_smoothing, c.huber_delta}, c.ema_decay});
}

LoaderOptions train_loader_options(const Config& c, const RunContext& ctx) {
  LoaderOptions o;
  o.batch_size = c.batch_size;
  o.shuffle = c.shuffle;
  o.drop_last = c.drop_last;
  o.num_workers = c.num_workers;
  o.prefetch_factor = c.prefetch_factor;
  o.persistent_workers = c.persistent_workers;
  o.pin_memory = ctx.pin_memory;
  o.seed = static_cast<uint64_t>(c.seed);
  o.device = ctx.device;
  o.non_blocking = ctx.non_blocking;
  o.channels_last = ctx.channels_last;
  return o;
}

}  // namespace gputrain
