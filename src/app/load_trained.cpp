// A trained model for `eval` and `infer`: the checkpoint's configuration, a Session, the weights.
#include "app/load_trained.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "config/merge.h"
#include "train/run_program.h"

namespace gputrain {

Trained load_trained(const std::string& checkpoint, const std::vector<FlagArg>& flags) {
  Trained t;
  t.meta = read_checkpoint_meta(checkpoint);
  const nlohmann::json record = checkpoint_record(checkpoint, t.meta);
  StoredConfig saved = read_config_record(record);
  // Other test data named on the command line replaces the run's held-out split.
  if (has_flag(flags, "test_file")) saved.requested["val_split"] = 0.0;
  Config c = resolve_resumed_config(saved.requested, flags);
  c.resume.clear();
  // A model from a file: the run's own copy of it, checked (train/run_program.h).
  if (record.contains("program"))
    c.model = find_program(record["program"], run_dir_of(checkpoint), has_flag(flags, "model") ? c.model : "",
                           c.trust_program);
  // A pipeline-trained checkpoint holds the model whole: eval and infer run it on one device.
  c.pipeline_stages = 1;
  c.micro_batches = kAuto;
  SessionOptions o;  // (designated initializers here set off a false GCC 12 -Wmaybe-uninitialized)
  o.pinned = saved.resolved;
  o.search_batch_size = o.check_amp = false;  // eval and infer neither search nor take gradients
  t.session = std::make_unique<Session>(c, o);
  load_checkpoint(checkpoint, t.session->trainer());
  return t;
}

}  // namespace gputrain
