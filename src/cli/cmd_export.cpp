// `gputrain export --checkpoint C --out model.safetensors`: a checkpoint's weights for Python.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "train/checkpoint.h"
#include "train/export.h"

namespace gputrain {

int cmd_export(const std::vector<std::string>& words) {
  Args args = parse_args(words, [](const std::string& n) { return n == "help"; });
  if (args.take_switch("help")) {
    std::printf(
        "usage: gputrain export --checkpoint CHECKPOINT --out model.safetensors [--weights auto|ema|raw]\n\n"
        "Writes the checkpoint's model weights (every parameter and buffer, under the names\n"
        "torch gives them) as safetensors, loadable in Python with\n"
        "  safetensors.torch.load_file(path) -> model.load_state_dict(..., strict=True).\n"
        "--weights: ema = the run's exponential moving average (--ema_decay), raw = the\n"
        "trained weights themselves, auto (default) = the average when the run kept one, as\n"
        "`infer` and `train --export` do. Needs neither the dataset nor a GPU.\n");
    return 0;
  }
  auto checkpoint = args.take_value("checkpoint");
  auto out = args.take_value("out");
  const std::string which = args.take_value("weights").value_or("auto");
  reject_leftover_flags(args, {"checkpoint", "out", "weights", "help"});
  if (which != "auto" && which != "ema" && which != "raw")
    throw usage_error("--weights '" + which + "' is not one of auto, ema, raw",
                      "auto picks the EMA when the run kept one");
  if (!args.positionals.empty())
    throw usage_error("unexpected argument '" + args.positionals[0] + "' to export",
                      "gputrain export --checkpoint runs/<name>/checkpoints/best.pt --out model.safetensors");
  if (!checkpoint || checkpoint->empty() || !out || out->empty())
    throw usage_error("export needs --checkpoint and --out",
                      "gputrain export --checkpoint runs/<name>/checkpoints/best.pt --out model.safetensors");

  CheckpointWeights stored = read_checkpoint_weights(*checkpoint);
  check_writable(*out, "export file");
  if (which == "ema" && stored.ema.empty())
    throw usage_error("checkpoint '" + *checkpoint + "' holds no EMA of the weights",
                      "the run had no --ema_decay; export its weights with --weights raw");
  const bool ema = which != "raw" && !stored.ema.empty();
  const NamedTensors& weights = ema ? stored.ema : stored.raw;
  const CheckpointMeta& meta = stored.meta;
  Metadata info = {{"gputrain_config", meta.config_json},
                   {"gputrain_version", GPUTRAIN_VERSION},
                   {"gputrain_step", std::to_string(meta.step)},
                   {"gputrain_checkpoint", *checkpoint},
                   {"gputrain_weights", ema ? "ema" : "raw"}};
  if (auto cfg = nlohmann::json::parse(meta.config_json, nullptr, false); cfg.is_object() && cfg.contains("model"))
    info["gputrain_model"] = cfg["model"].get<std::string>();
  save_safetensors(*out, weights, info);
  std::printf("wrote %s (%zu tensors from %s, step %lld, %s)\n", out->c_str(), weights.size(), checkpoint->c_str(),
              static_cast<long long>(meta.step), ema ? "the EMA average" : "raw weights");
  return 0;
}

}  // namespace gputrain
