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
    std::printf("usage: gputrain export --checkpoint CHECKPOINT --out model.safetensors\n\n"
                "Writes the checkpoint's model weights (every parameter and buffer, under the names\n"
                "torch gives them) as safetensors, loadable in Python with\n"
                "  safetensors.torch.load_file(path) -> model.load_state_dict(..., strict=True).\n"
                "Needs neither the dataset nor a GPU. `gputrain train --export PATH` does the same\n"
                "with the final weights at the end of a run.\n");
    return 0;
  }
  auto checkpoint = args.take_value("checkpoint");
  auto out = args.take_value("out");
  reject_leftover_flags(args, {"checkpoint", "out", "help"});
  if (!args.positionals.empty())
    throw usage_error("unexpected argument '" + args.positionals[0] + "' to export",
                      "gputrain export --checkpoint runs/<name>/checkpoints/best.pt --out model.safetensors");
  if (!checkpoint || checkpoint->empty() || !out || out->empty())
    throw usage_error("export needs --checkpoint and --out",
                      "gputrain export --checkpoint runs/<name>/checkpoints/best.pt --out model.safetensors");

  CheckpointMeta meta = read_checkpoint_meta(*checkpoint);
  check_writable(*out, "export file");
  NamedTensors weights = read_checkpoint_weights(*checkpoint);
  Metadata info = {{"gputrain_config", meta.config_json},
                   {"gputrain_version", GPUTRAIN_VERSION},
                   {"gputrain_step", std::to_string(meta.step)},
                   {"gputrain_checkpoint", *checkpoint}};
  if (auto cfg = nlohmann::json::parse(meta.config_json, nullptr, false); cfg.is_object() && cfg.contains("model"))
    info["gputrain_model"] = cfg["model"].get<std::string>();
  save_safetensors(*out, weights, info);
  std::printf("wrote %s (%zu tensors from %s, step %lld, raw weights)\n", out->c_str(), weights.size(),
              checkpoint->c_str(), static_cast<long long>(meta.step));
  if (auto cfg = nlohmann::json::parse(meta.config_json, nullptr, false);
      cfg.is_object() && cfg.value("ema_decay", 0.0) > 0)
    std::printf("note: this run also kept an EMA of the weights; `train --export` writes that average\n");
  return 0;
}

}  // namespace gputrain
