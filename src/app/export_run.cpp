// `gputrain export`: a checkpoint's weights as safetensors, read in one pass on the CPU.
#include "app/export_run.h"

#include <fmt/format.h>

#include "config/resolved.h"
#include "core/error.h"
#include "train/checkpoint.h"
#include "weights/safetensors.h"

namespace gputrain {

int run_export(const ExportRequest& q) {
  CheckpointWeights stored = read_checkpoint_weights(q.checkpoint);
  check_writable(q.out, "export file");
  if (q.weights == "ema" && stored.ema.empty())
    throw usage_error("checkpoint '" + q.checkpoint + "' holds no EMA of the weights",
                      "the run had no --ema_decay; export its weights with --weights raw");
  const bool ema = q.weights != "raw" && !stored.ema.empty();
  const NamedTensors& weights = ema ? stored.ema : stored.raw;
  if (!q.allow_non_finite) {
    std::vector<std::string> bad;
    for (const auto& [name, t] : weights)
      if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>()) bad.push_back(name);
    if (!bad.empty())
      throw Error({fmt::format("checkpoint '{}' holds non-finite values in {} tensor(s), first '{}'; nothing written",
                               q.checkpoint, bad.size(), bad.front())},
                  "export an earlier checkpoint, or pass --allow_non_finite to write them anyway", kExitNonFinite);
  }
  const CheckpointMeta& meta = stored.meta;
  Metadata info = {{"gputrain_config", meta.config_json},
                   {"gputrain_version", GPUTRAIN_VERSION},
                   {"gputrain_step", std::to_string(meta.step)},
                   {"gputrain_checkpoint", q.checkpoint},
                   {"gputrain_weights", ema ? "ema" : "raw"}};
  if (auto record = nlohmann::json::parse(meta.config_json, nullptr, false); record.is_object()) {
    const auto resolved = read_config_record(record).resolved;
    if (resolved.is_object() && resolved.contains("model") && resolved["model"].is_string())
      info["gputrain_model"] = resolved["model"].get<std::string>();
  }
  save_safetensors(q.out, weights, info);
  fmt::print("wrote {} ({} tensors from {}, step {}, {})\n", q.out, weights.size(), q.checkpoint, meta.step,
             ema ? "the EMA average" : "raw weights");
  return 0;
}

}  // namespace gputrain
