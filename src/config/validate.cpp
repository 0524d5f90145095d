// Validation of a merged Config: the field table's ranges and choices, then the rules that tie
// one field to another.
#include "config/validate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/fields.h"
#include "config/fit_target.h"
#include "config/profile_range.h"
#include "core/error.h"
#include "core/text.h"

namespace gputrain {

namespace {

std::string format_number(double x) { return fmt::format("{:g}", x); }

std::string range_text(const Field& f) {
  bool integer = f.type_name() == "int";
  std::string kind = integer ? "an integer" : "a number";
  bool has_max = std::isfinite(f.max);
  if (has_max && std::isfinite(f.min)) return kind + " in [" + format_number(f.min) + ", " + format_number(f.max) + "]";
  if (std::isfinite(f.min)) return kind + " >= " + format_number(f.min);
  return kind;
}

bool file_based_task(const std::string& dataset) {
  return dataset == "csv" || dataset == "npy" || dataset == "jsonl" || dataset == "text";
}

}  // namespace

std::vector<std::string> config_problems(const Config& c) {
  std::vector<std::string> problems;
  for (const auto& f : config_fields()) {
    nlohmann::json v = f.get(c);
    if (v.is_number()) {
      double x = v.get<double>();
      if (!(x >= f.min && x <= f.max))
        problems.push_back(f.name + " '" + v.dump() + "' (expected " + range_text(f) + ")");
    } else if (v.is_string() && !f.choices.empty()) {
      std::string s = v.get<std::string>();
      if (std::find(f.choices.begin(), f.choices.end(), s) == f.choices.end() && !(f.name == "model" && is_model_file(s)))
        problems.push_back(f.name + " '" + s + "' (expected one of: " + join(f.choices, ", ") + ")" +
                           did_you_mean(s, f.choices));
    }
  }
  static const std::regex device_re("auto|cpu|cuda|cuda:[0-9]+");
  if (!std::regex_match(c.device, device_re))
    problems.push_back("device '" + c.device + "' (expected auto, cpu, cuda or cuda:N)");
  auto shape = parse_shape(c.input_shape);
  if (shape.empty() || shape.size() > 5)
    problems.push_back("input_shape '" + c.input_shape + "' (expected 1 to 5 sizes, e.g. 3x32x32, 64x8 or 20)");
  else if (std::accumulate(shape.begin(), shape.end(), 1.0, std::multiplies<double>()) > double(int64_t{1} << 26))
    problems.push_back("input_shape '" + c.input_shape + "' (more than 2^26 values per sample)");
  if (!c.image_size.empty() && parse_image_size(c.image_size).empty())
    problems.push_back("image_size '" + c.image_size + "' (expected HxW or N, e.g. 224 or 64x48)");
  for (auto [name, text] : {std::pair{"normalize_mean", &c.normalize_mean}, {"normalize_std", &c.normalize_std}})
    if (!text->empty() && normalize_numbers(*text, true).empty())
      problems.push_back(std::string(name) + " '" + *text + "' (expected numbers like 0.485,0.456,0.406, or imagenet)");
  if (c.normalize_mean.empty() != c.normalize_std.empty())
    problems.push_back("normalize_mean and normalize_std go together (got only one)");
  for (double s : normalize_numbers(c.normalize_std, false))
    if (s <= 0) problems.push_back("normalize_std '" + c.normalize_std + "' (expected values > 0)");
  auto jitter = parse_numbers(c.color_jitter);
  if (!c.color_jitter.empty() && (jitter.empty() || jitter.size() > 4 ||
                                  std::any_of(jitter.begin(), jitter.end(), [](double v) { return v < 0; }) ||
                                  (jitter.size() == 4 && jitter[3] > 0.5)))
    problems.push_back("color_jitter '" + c.color_jitter +
                       "' (expected brightness[,contrast[,saturation[,hue]]] >= 0, hue <= 0.5)");
  if (c.task == "multilabel" && c.dataset != "text")
    problems.push_back("--task multilabel is for --dataset text (several 0/1 label columns); got --dataset " + c.dataset);
  if (c.task == "regression" && !file_based_task(c.dataset))
    problems.push_back("task 'regression' needs float targets from --dataset csv, npy, jsonl or text (got '" + c.dataset + "')");
  // At F <= 1 about half the steps, those with a loss above the mean, would be skipped.
  if (c.skip_spikes > 0 && c.skip_spikes <= 1)
    problems.push_back(fmt::format("skip_spikes '{}' (expected 0 for off, or a factor above 1, e.g. 3)", c.skip_spikes));
  if (c.image_channels != 1 && c.image_channels != 3)
    problems.push_back(fmt::format("image_channels '{}' (expected 1 or 3)", c.image_channels));
  const bool file_based = file_based_task(c.dataset) || c.dataset == "tokens";
  if (file_based && c.train_file.empty())
    problems.push_back("dataset '" + c.dataset + "' needs --train_file (" +
                       (c.dataset == "tokens" ? std::string("the training token shards, e.g. 'data/train_*.bin'")
                                              : "the training ." +
                                                    (c.dataset == "npy" ? std::string("npy or .npz") : c.dataset) +
                                                    " file") +
                       ")");
  if (c.dataset == "tokens" && c.seq_len == 0)
    problems.push_back("dataset 'tokens' needs --seq_len (tokens per sample, e.g. 256; GPT-2 used 1024)");
  if (c.dataset == "csv" && c.target.empty())
    problems.push_back("dataset 'csv' needs --target (the label column, or columns for regression)");
  if (!c.test_file.empty() && c.val_split > 0)
    problems.push_back(
        "--val_split with --test_file: evaluation would use the held-out part, not the test file (drop one)");
  // Data options that the chosen format would not read are refused rather than ignored.
  const Config defaults;
  auto only_for = [&](bool given, bool applies, const std::string& what, const std::string& where) {
    if (given && !applies) problems.push_back(what + " " + where + " (got --dataset " + c.dataset + ")");
  };
  only_for(!c.target.empty(), c.dataset == "csv" || c.dataset == "jsonl", "--target is",
           "for --dataset csv (its target columns) or jsonl (its target field)");
  only_for(!c.features.empty() || c.window > 0, c.dataset == "csv", "--features and --window are", "for --dataset csv");
  only_for(c.stride != defaults.stride || c.horizon != defaults.horizon, c.dataset == "csv" && c.window > 0,
           "--stride and --horizon are", "for --dataset csv with --window");
  only_for(c.seq_len > 0 || c.vocab_size > 0 || c.eval_tokens > 0 || c.tokens_per_step > 0, c.dataset == "tokens",
           "--seq_len, --vocab_size, --eval_tokens and --tokens_per_step are", "for --dataset tokens");
  only_for(!c.tokenizer.empty(), c.dataset == "tokens" || c.dataset == "text", "--tokenizer is",
           "for --dataset tokens (the shards' tokenizer) or text (the SentencePiece model of a table of texts)");
  only_for(!c.text_column.empty() || !c.label_column.empty() || c.max_length != defaults.max_length, c.dataset == "text",
           "--text_column, --label_column and --max_length are", "for --dataset text (a table of texts)");
  if (c.tokens_per_step > 0 && c.accumulation_steps != defaults.accumulation_steps)
    problems.push_back("--tokens_per_step decides --accumulation_steps: give one of them (got --accumulation_steps " +
                       std::to_string(c.accumulation_steps) + ")");
  only_for(!c.train_file.empty(), file_based, "--train_file is", "for --dataset csv, npy, jsonl, text or tokens");
  only_for(!c.test_file.empty(), file_based || c.dataset == "webdataset", "--test_file is",
           "for --dataset csv, npy, jsonl, text, tokens or webdataset (their evaluation files)");
  if (c.dataset == "webdataset" && c.data_dir.empty())
    problems.push_back("dataset 'webdataset' needs --data_dir: its training shards, e.g. 'shards/train-{000000..000127}.tar'");
  only_for(c.shuffle_buffer != defaults.shuffle_buffer, c.dataset == "webdataset", "--shuffle_buffer is",
           "for --dataset webdataset");
  only_for(!c.train_targets.empty() || !c.test_targets.empty(), c.dataset == "npy",
           "--train_targets and --test_targets are", "for --dataset npy");
  only_for(c.image_channels != defaults.image_channels || c.skip_bad_samples ||
               c.max_image_pixels != defaults.max_image_pixels,
           encoded_images(c.dataset), "--image_channels, --max_image_pixels and --skip_bad_samples are",
           "for --dataset image_folder or webdataset");
  const auto scale = parse_numbers(c.rrc_scale), ratio = parse_numbers(c.rrc_ratio);
  if (scale.size() != 2 || !(scale[0] > 0 && scale[0] <= scale[1] && scale[1] <= 1))
    problems.push_back("rrc_scale '" + c.rrc_scale + "' (expected MIN,MAX with 0 < MIN <= MAX <= 1, e.g. 0.08,1)");
  if (ratio.size() != 2 || !(ratio[0] > 0 && ratio[0] <= ratio[1]))
    problems.push_back("rrc_ratio '" + c.rrc_ratio + "' (expected MIN,MAX with 0 < MIN <= MAX, e.g. 3/4,4/3)");
  if ((c.remode != defaults.remode || c.recount != defaults.recount) && c.reprob == 0)
    problems.push_back("--remode and --recount are for random erasing (--reprob is 0)");
  if ((c.mixup_prob != defaults.mixup_prob || c.mixup_switch_prob != defaults.mixup_switch_prob) && c.mixup == 0 &&
      c.cutmix == 0)
    problems.push_back("--mixup_prob and --mixup_switch_prob are for --mixup or --cutmix (both are 0)");
  if (c.mixup_switch_prob != defaults.mixup_switch_prob && (c.mixup == 0 || c.cutmix == 0))
    problems.push_back("--mixup_switch_prob chooses between --mixup and --cutmix: set both");
  if ((c.rrc_scale != defaults.rrc_scale || c.rrc_ratio != defaults.rrc_ratio) && !c.random_resized_crop)
    problems.push_back("--rrc_scale and --rrc_ratio are for --random_resized_crop (it is off)");
  if (!c.reduced_decode && !(c.random_resized_crop && encoded_images(c.dataset)))
    problems.push_back("--no-reduced_decode is for --random_resized_crop on --dataset image_folder or webdataset");
  if (c.crop_pct > 0 && c.crop_pct < 0.05)
    problems.push_back(fmt::format("crop_pct '{:g}' (expected 0 for off, or 0.05 to 1)", c.crop_pct));
  only_for(c.crop_pct > 0, encoded_images(c.dataset), "--crop_pct is",
           "for --dataset image_folder or webdataset (their evaluation images)");
  only_for(c.input_shape != defaults.input_shape, c.dataset == "synthetic", "--input_shape is",
           "for --dataset synthetic (other data brings its own)");
  if (c.num_classes == 1) problems.push_back("num_classes '1' (classification needs 2 classes or more)");
  if (c.num_classes > 0 && c.task == "regression") problems.push_back("--num_classes is for classification (got --task regression)");
  if (c.lr >= 0 && c.min_lr > c.lr)
    problems.push_back("min_lr '" + format_number(c.min_lr) + "' (expected <= lr " + format_number(c.lr) + ")");
  if (!c.profile.empty() && !ProfileRange::parse(c.profile))
    problems.push_back("profile '" + c.profile + "' (expected START:STOP[:shapes] with 0 <= START < STOP, e.g. 10:15: steps 11 to 15)");
  if (!c.time_limit.empty() && parse_duration(c.time_limit) <= 0)
    problems.push_back("time_limit '" + c.time_limit + "' (expected a duration like 8h45m, 90m or 3600)");
  if (!c.until.empty()) {
    try {
      parse_target(c.until);
    } catch (const Error& e) {
      problems.push_back(e.problems.front() + " (" + e.hint + ")");
    }
  }
  if (c.allow_data_change && c.resume.empty())
    problems.push_back("--allow_data_change is for a resume (--resume auto or a checkpoint)");
  if (c.resume == "auto" && c.output_dir.empty())
    problems.push_back("resume 'auto' needs --output_dir (the run folder to continue)");
  // Trust is for a program to load (with --resume the model is the checkpoint's, not known yet).
  if (c.trust_program && !is_script_file(c.model) && c.resume.empty())
    problems.push_back("--trust_program is for a TorchScript --model net.pt (got --model " + c.model + ")");
  // Fine-tuning flags that have nothing to act on without the one they refine.
  if (c.init_ema && c.init_from.empty()) problems.push_back("--init_ema needs --init_from (the checkpoint to take it from)");
  if (!c.init_strict && c.init_from.empty()) problems.push_back("--init_strict needs --init_from (the file to match)");
  if (c.unfreeze_at_epoch > 0 && c.freeze.empty())
    problems.push_back("--unfreeze_at_epoch needs --freeze (what is frozen until then)");
  if (c.freeze_bn && c.freeze.empty()) problems.push_back("--freeze_bn needs --freeze (the BatchNorm layers to keep)");
  if (c.lora_rank > 0 && c.model != "gpt" && c.model != "llama")
    problems.push_back("--lora_rank is for --model gpt or llama (got --model " + c.model + ")");
  if (c.lora_rank > 0 && !c.freeze.empty())
    problems.push_back("--lora_rank trains the adapters alone; --freeze has nothing left to freeze");
  if (c.lora_alpha > 0 && c.lora_rank == 0) problems.push_back("--lora_alpha needs --lora_rank (the adapters it scales)");
  if (c.unfreeze_at_epoch >= c.epochs && c.unfreeze_at_epoch > 0)
    problems.push_back(fmt::format("unfreeze_at_epoch '{}' (expected < --epochs {}: epochs count from 0)", c.unfreeze_at_epoch, c.epochs));
  if (c.nesterov && c.optimizer == "sgd" && c.momentum == 0)
    problems.push_back("nesterov needs a momentum > 0 (got --momentum 0)");
  return problems;
}

}  // namespace gputrain
