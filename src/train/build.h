// Builds what a Config asks for, the same way for `train` and `benchmark`: the Trainer (model on
// the device, channels_last, optimizer, scaler) and the training Loader's options.
#pragma once
#include <memory>

#include "config/config.h"
#include "core/device.h"
#include "data/loader.h"
#include "train/trainer.h"

namespace gputrain {

// Throws a usage error when model options are given to a model that does not use them.
void check_model_options(const Config& c);

// Checks the task options (--monitor_metric, --loss, --label_smoothing) against the data's task
// and returns the metric to monitor ("auto" resolved). Throws a usage error listing every problem.
std::string check_task_options(const Config& c, const Dataset& train);

std::unique_ptr<Trainer> build_trainer(const Config& c, const RunContext& ctx, const Dataset& train_data);

LoaderOptions train_loader_options(const Config& c, const RunContext& ctx);

}  // namespace gputrain
