// Builds what a Config asks for, the same way for `train` and `benchmark`.
#include "train/build.h"

#include "train/optim.h"

namespace gputrain {

std::unique_ptr<Trainer> build_trainer(const Config& c, const RunContext& ctx, const Dataset& train_data) {
  NetPtr model = make_model(c.model, {train_data.sample_shape(), train_data.num_classes(), c.width});
  model->to(ctx.device);
  if (ctx.channels_last) to_channels_last(*model);
  auto optimizer = make_optimizer(c, *model);  // after the moves: it must hold the final tensors
  return std::make_unique<Trainer>(model, std::move(optimizer), ctx,
                                   TrainerOptions{c.accumulation_steps, c.clip_max_norm, c.label_smoothing});
}

LoaderOptions train_loader_options(const Config& c, const RunContext& ctx) {
  return {c.batch_size,         c.shuffle,      c.drop_last, c.num_workers, c.prefetch_factor,
          c.persistent_workers, ctx.pin_memory, static_cast<uint64_t>(c.seed)};
}

}  // namespace gputrain
