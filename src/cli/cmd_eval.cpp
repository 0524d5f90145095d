// `gputrain eval --checkpoint C [data flags]`: the task's metrics of a trained model on a dataset.
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "config/merge.h"
#include "core/error.h"
#include "train/evaluate.h"
#include "train/load_trained.h"

namespace gputrain {

int cmd_eval(const std::vector<std::string>& words) {
  Args args = parse_config_args(words);
  if (args.take_switch("help")) {
    std::printf(
        "usage: gputrain eval --checkpoint FILE [--json FILE] [train flags]\n\n"
        "Evaluates a checkpoint on the test split of its run's dataset (the held-out\n"
        "validation part when the run had one), or on the data the flags name, e.g.\n"
        "--test_file other.csv. Prints the loss and the task's metrics.\n");
    return 0;
  }
  auto checkpoint = args.take_value("checkpoint");
  auto json_out = args.take_value("json");
  if (!checkpoint || checkpoint->empty())
    throw usage_error("eval needs --checkpoint FILE",
                      "e.g. gputrain eval --checkpoint runs/<name>/checkpoints/best.pt");
  if (!args.positionals.empty()) throw usage_error("unexpected argument '" + args.positionals[0] + "' to eval");

  Trained t = load_trained(*checkpoint, args.flags);
  std::printf("checkpoint: %s (epoch %lld, step %lld)\ndata: %s\n", checkpoint->c_str(),
              static_cast<long long>(t.meta.epoch), static_cast<long long>(t.meta.step), t.data.description.c_str());
  Loader loader(t.data.test, inference_loader_options(t, t.config.eval_batch_size));
  EvalResult r = evaluate(*t.trainer, loader);
  std::printf("test: %s (%lld samples)\n", r.summary_line().c_str(), static_cast<long long>(r.samples));
  EvalResult ema;
  if (Ema* average = t.trainer->ema()) {  // the run kept an average of the weights: evaluate it too
    average->swap(t.trainer->model());
    ema = evaluate(*t.trainer, loader);
    average->swap(t.trainer->model());
    std::printf("test (ema): %s\n", ema.summary_line().c_str());
  }
  if (json_out) {
    nlohmann::json j = {{"checkpoint", *checkpoint}, {"samples", r.samples}};
    r.add_to(j, "test_");
    if (t.trainer->ema()) ema.add_to(j, "test_ema_");
    std::ofstream out(*json_out);
    if (!(out << j.dump(2) << "\n")) throw usage_error("cannot write --json '" + *json_out + "'");
  }
  return 0;
}

}  // namespace gputrain
