// Loads a trained model for `eval` and `infer`: the checkpoint's own configuration (< flags),
// its data pipeline (with the normalization the run stored) and its weights.
#include "train/load_trained.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "config/merge.h"
#include "core/device_cuda.h"
#include "train/build.h"

namespace gputrain {

Trained load_trained(const std::string& checkpoint, const std::vector<FlagArg>& flags) {
  Trained t;
  t.meta = read_checkpoint_meta(checkpoint);
  auto saved = nlohmann::json::parse(t.meta.config_json);
  // Other test data named on the command line replaces the run's held-out split.
  if (std::any_of(flags.begin(), flags.end(), [](const FlagArg& f) { return f.name == "test_file"; }))
    saved["val_split"] = 0.0;
  t.config = resolve_resumed_config(saved, flags);
  t.config.resume.clear();
  if (t.config.device == "auto") {
    auto gpus = query_gpus();
    if (gpus.size() > 1) {
      auto most_free = std::max_element(gpus.begin(), gpus.end(),
                                        [](const GpuInfo& a, const GpuInfo& b) { return a.free_bytes < b.free_bytes; });
      t.config.device = "cuda:" + std::to_string(most_free->index);
    }
  }
  t.ctx = make_run_context(t.config);
  t.data = make_datasets(t.config);
  t.trainer = build_trainer(t.config, t.ctx, *t.data.train);
  load_checkpoint(checkpoint, *t.trainer);
  return t;
}

LoaderOptions inference_loader_options(const Trained& t, int64_t batch_size) {
  LoaderOptions o = train_loader_options(t.config, t.ctx);
  o.batch_size = batch_size;
  o.shuffle = o.drop_last = false;
  return o;
}

}  // namespace gputrain
