// `gputrain export --checkpoint C --out model.safetensors`: a checkpoint's weights for Python.
#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "app/export_run.h"

namespace gputrain {

int cmd_export(const std::vector<std::string>& words) {
  Args args = parse_command_line(
      words, {{"checkpoint", true}, {"out", true}, {"weights", true}, {"allow_non_finite", false}, {"format", true}}, false);
  if (args.take_switch("help")) {
    fmt::print(
        "usage: gputrain export --checkpoint CHECKPOINT --out model.safetensors [--weights auto|ema|raw]\n"
        "       gputrain export --checkpoint CHECKPOINT --format hf --out DIR\n\n"
        "Writes the checkpoint's model weights (every parameter and buffer, under the names\n"
        "torch gives them) as safetensors, loadable in Python with\n"
        "  safetensors.torch.load_file(path) -> model.load_state_dict(..., strict=True).\n"
        "--weights: ema = the run's exponential moving average (--ema_decay), raw = the\n"
        "trained weights themselves, auto (default) = the average when the run kept one, as\n"
        "`infer` and `train --export` do. Needs neither the dataset nor a GPU. Weights with NaN\n"
        "or inf are refused (exit 3) unless --allow_non_finite.\n"
        "--format hf (model gpt or llama): DIR gets config.json, model.safetensors and the run's\n"
        "tokenizer.json, for transformers' GPT2LMHeadModel (LlamaForCausalLM).from_pretrained(DIR).\n");
    return 0;
  }
  ExportRequest q;
  q.checkpoint = args.take_value("checkpoint").value_or("");
  q.out = args.take_value("out").value_or("");
  q.weights = args.take_value("weights").value_or("auto");
  q.allow_non_finite = args.take_switch("allow_non_finite");
  q.format = args.take_value("format").value_or("safetensors");
  reject_leftover_flags(args, {"checkpoint", "out", "weights", "allow_non_finite", "format", "help"});
  if (q.format != "safetensors" && q.format != "hf")
    throw usage_error("--format '" + q.format + "' is not one of safetensors, hf",
                      "hf writes a GPT-2 checkpoint as a Hugging Face folder");
  if (q.weights != "auto" && q.weights != "ema" && q.weights != "raw")
    throw usage_error("--weights '" + q.weights + "' is not one of auto, ema, raw",
                      "auto picks the EMA when the run kept one");
  if (!args.positionals.empty())
    throw usage_error("unexpected argument '" + args.positionals[0] + "' to export",
                      "gputrain export --checkpoint runs/<name>/checkpoints/best.pt --out model.safetensors");
  if (q.checkpoint.empty() || q.out.empty())
    throw usage_error("export needs --checkpoint and --out",
                      "gputrain export --checkpoint runs/<name>/checkpoints/best.pt --out model.safetensors");
  return run_export(q);
}

}  // namespace gputrain
