// `gputrain export`: a checkpoint's weights as safetensors, read in one pass on the CPU.
#include "app/export_run.h"

#include <filesystem>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "config/config.h"
#include "config/resolved.h"
#include "core/error.h"
#include "core/output_paths.h"
#include "models/lora.h"
#include "train/checkpoint.h"
#include "train/run_program.h"
#include "weights/hf_gpt2.h"
#include "weights/hf_llama.h"
#include "weights/safetensors.h"

namespace gputrain {

namespace {

// --format hf: a gpt checkpoint as the folder GPT2LMHeadModel.from_pretrained loads (a llama
// one as LlamaForCausalLM's), its shape from the run's resolved config and the tokenizer the run
// read copied beside it.
// --format hf for a llama checkpoint: the folder LlamaForCausalLM.from_pretrained loads, its
// shape from the run's resolved config (every value of it decided and recorded at the start).
int export_hf_llama(const ExportRequest& q, const NamedTensors& weights, const nlohmann::json& resolved,
                    const CheckpointMeta& meta, bool ema) {
  LlamaShape s;
  const auto integer = [&](const char* key) { return resolved.value(key, int64_t{0}); };
  s.base = {integer("num_classes"), integer("positions"), integer("width"), integer("depth"), integer("heads")};
  s.kv_heads = integer("kv_heads");
  s.mlp_width = integer("mlp_width");
  s.rope_theta = resolved.value("rope_theta", 0.0);
  s.norm_eps = resolved.value("norm_eps", 0.0);
  s.tied = resolved.value("tie_embeddings", false);
  if (const std::string scaling = resolved.value("rope_scaling", ""); !scaling.empty()) s.rope_scaling = parse_numbers(scaling);
  if (s.base.vocab <= 0 || s.base.width <= 0 || s.base.depth <= 0 || s.base.heads <= 0 || s.kv_heads <= 0 ||
      s.mlp_width <= 0 || s.rope_theta <= 0 || s.norm_eps <= 0 || (!s.rope_scaling.empty() && s.rope_scaling.size() != 4))
    throw usage_error(fmt::format("checkpoint '{}' does not record a whole Llama shape", q.checkpoint),
                      "export it as safetensors (the default --format)");
  const std::string tokenizer = resolved.value("tokenizer", "");
  const bool has_tokenizer = !tokenizer.empty() && std::filesystem::exists(tokenizer);
  write_hf_llama(q.out, weights, s, has_tokenizer ? tokenizer : "");
  fmt::print("wrote {}/{{config.json, model.safetensors{}}} (Llama, {} layers, width {}, {} of {} key/value heads, "
             "vocabulary {}{}; {} from {}, step {})\n",
             q.out, has_tokenizer ? ", tokenizer.json" : "", s.base.depth, s.base.width, s.kv_heads, s.base.heads,
             s.base.vocab, s.tied ? ", tied head" : "", ema ? "the EMA average" : "raw weights", q.checkpoint, meta.step);
  return 0;
}

int export_hf(const ExportRequest& q, const NamedTensors& weights, const CheckpointMeta& meta, bool ema) {
  const auto record = nlohmann::json::parse(meta.config_json, nullptr, false);
  const nlohmann::json resolved = record.is_object() ? read_config_record(record).resolved : nlohmann::json();
  const std::string model = resolved.is_object() ? resolved.value("model", "") : "";
  if (model != "gpt" && model != "llama")
    throw usage_error(fmt::format("--format hf writes GPT-2 and Llama folders; checkpoint '{}' is of model '{}'",
                                  q.checkpoint, model),
                      "export other models as safetensors (the default --format)");
  if (std::error_code ec; std::filesystem::exists(q.out, ec) && !std::filesystem::is_empty(q.out, ec))
    throw usage_error("--out '" + q.out + "' exists and is not empty: a model folder's files would mix with its own",
                      "give a new folder (it is created)");
  if (model == "llama") return export_hf_llama(q, weights, resolved, meta, ema);
  // The shape from the weights themselves; heads from the record (runs before it was recorded
  // used gpt's default of 12).
  GptShape g;
  g.vocab = resolved.value("num_classes", int64_t{0});
  g.heads = resolved.value("heads", int64_t{0}) > 0 ? resolved.value("heads", int64_t{0}) : 12;
  for (const auto& [name, t] : weights) {
    if (name == "transformer.wpe.weight") std::tie(g.positions, g.width) = std::pair{t.size(0), t.size(1)};
    if (name.rfind("transformer.h.", 0) == 0 && name.ends_with(".ln_1.weight")) ++g.depth;
  }
  if (g.vocab <= 0 || g.width <= 0 || g.depth <= 0 || g.width % g.heads != 0)
    throw usage_error(fmt::format("checkpoint '{}' does not describe a GPT-2 (vocabulary {}, width {}, {} layers, {} heads)",
                                  q.checkpoint, g.vocab, g.width, g.depth, g.heads),
                      "export it as safetensors (the default --format)");
  const std::string tokenizer = resolved.value("tokenizer", "");
  const bool has_tokenizer = !tokenizer.empty() && std::filesystem::exists(tokenizer);
  write_hf_gpt2(q.out, weights, g, has_tokenizer ? tokenizer : "");
  fmt::print("wrote {}/{{config.json, model.safetensors{}}} (GPT-2, {} layers, width {}, vocabulary {}; {} from {}, "
             "step {}){}\n",
             q.out, has_tokenizer ? ", tokenizer.json" : "", g.depth, g.width, g.vocab, ema ? "the EMA average" : "raw weights",
             q.checkpoint, meta.step,
             has_tokenizer ? "" : "\n  no tokenizer.json: the run read its vocabulary from --vocab_size");
  return 0;
}

}  // namespace

int run_export(const ExportRequest& q) {
  // --format hf writes these files into the folder --out.
  std::vector<PathFlag> outputs = {{"--out", q.out}};
  if (q.format == "hf") {
    namespace fs = std::filesystem;
    outputs.clear();
    for (const char* name : {"config.json", "model.safetensors", "tokenizer.json"})
      outputs.push_back({"--out", (fs::path(q.out) / name).string()});
  }
  refuse_outputs_over_inputs(outputs, {{"--checkpoint", q.checkpoint}});
  if (holds_run(run_dir_of(q.checkpoint)))
    for (const auto& out : outputs) refuse_output_in_run(out, run_dir_of(q.checkpoint));
  CheckpointWeights stored = read_checkpoint_weights(q.checkpoint);
  if (q.format != "hf") check_writable(q.out, "export file");
  if (q.weights == "ema" && stored.ema.empty())
    throw usage_error("checkpoint '" + q.checkpoint + "' holds no EMA of the weights",
                      "the run had no --ema_decay; export its weights with --weights raw");
  const bool ema = q.weights != "raw" && !stored.ema.empty();
  NamedTensors& weights = ema ? stored.ema : stored.raw;
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
  const auto record = nlohmann::json::parse(meta.config_json, nullptr, false);
  if (record.is_object()) {
    const auto resolved = read_config_record(record).resolved;
    if (resolved.is_object() && resolved.contains("model") && resolved["model"].is_string())
      info["gputrain_model"] = resolved["model"].get<std::string>();
    // LoRA adapters are folded into their weights: what is written is the plain model.
    const auto number = [&](const char* name) {
      return resolved.is_object() && resolved.contains(name) && resolved[name].is_number() ? resolved[name].get<double>() : 0.0;
    };
    const double rank = number("lora_rank"), alpha = number("lora_alpha");
    if (rank > 0 && alpha > 0) {
      const int64_t merged = merge_lora(weights, alpha / rank);
      info["gputrain_lora"] = fmt::format("{} adapters of rank {} merged (alpha {})", merged, rank, alpha);
      fmt::print("merged {} LoRA adapters of rank {} into their weights (scale {} / {})\n", merged, rank, alpha, rank);
    }
  }
  if (q.format == "hf") return export_hf(q, weights, meta, ema);
  // A tied parameter goes under each of its names (the run recorded them).
  if (record.is_object() && record.contains("tied_weights") && record["tied_weights"].is_object()) {
    std::vector<std::pair<std::string, std::string>> tied;
    for (const auto& [alias, own] : record["tied_weights"].items())
      if (own.is_string()) tied.emplace_back(alias, own.get<std::string>());
    weights = with_tied_names(std::move(weights), tied);
  }
  save_safetensors(q.out, weights, info);
  fmt::print("wrote {} ({} tensors from {}, step {}, {})\n", q.out, weights.size(), q.checkpoint, meta.step,
             ema ? "the EMA average" : "raw weights");
  return 0;
}

}  // namespace gputrain
