// `gputrain eval`: a checkpoint's metrics on a dataset (and its EMA's, when the run kept one).
#include "app/eval_run.h"

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/output_paths.h"
#include "train/run_program.h"
#include "train/evaluate.h"
#include "weights/safetensors.h"
#include "app/load_trained.h"

namespace gputrain {

int run_eval(const EvalRequest& q) {
  const PathFlag out{"--json", q.json_path.value_or("")};
  refuse_outputs_over_inputs({out}, {{"--checkpoint", q.checkpoint}});
  if (holds_run(run_dir_of(q.checkpoint))) refuse_output_in_run(out, run_dir_of(q.checkpoint));
  if (q.json_path) check_writable(*q.json_path, "--json file");  // now, not after the evaluation
  Trained t = load_trained(q.checkpoint, q.flags);
  Session& s = *t.session;
  refuse_outputs_over_inputs({out}, input_files(s.config(), true));  // the data it reads
  fmt::print("checkpoint: {} (epoch {}, step {})\ndata: {}\nsession: {}\n", q.checkpoint, t.meta.epoch, t.meta.step,
             s.data().description, s.describe_line());
  Loader loader(s.data().test, s.eval_loader_options(s.config().eval_batch_size));
  EvalResult r = evaluate(s.trainer(), loader);
  fmt::print("test: {} ({} samples)\n", r.summary_line(), r.samples);
  EvalResult ema;
  if (Ema* average = s.trainer().ema()) {  // the run kept an average of the weights: evaluate it too
    average->swap(s.trainer().model());
    ema = evaluate(s.trainer(), loader);
    average->swap(s.trainer().model());
    fmt::print("test (ema): {}\n", ema.summary_line());
  }
  const std::string hint = "an fp16 overflow (try --amp_dtype bf16 or --no-use_amp) or a checkpoint of diverged weights";
  r.require_finite("test", hint);
  ema.require_finite("test (EMA)", hint);
  if (q.json_path) {
    nlohmann::json j = {{"checkpoint", q.checkpoint}, {"samples", r.samples}};
    r.add_to(j, "test_");
    if (s.trainer().ema()) ema.add_to(j, "test_ema_");
    write_file_atomically(*q.json_path, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace gputrain
