// The Session: one run's pieces, built once, in one order, for every command.
#include "train/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "core/device_cuda.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/metric.h"
#include "core/text.h"
#include "config/fields.h"
#include "config/fit_target.h"
#include "data/schema.h"
#include "data/shift_labels.h"
#include "models/attention.h"
#include "models/imported.h"
#include "models/llama.h"
#include "models/lora.h"
#include "text/token_decoder.h"
#include "train/amp_check.h"
#include "train/auto_batch.h"
#include "train/auto_workers.h"
#include "step/fault_hooks.h"
#include "step/fine_tune.h"
#include "step/optimizer.h"
#include "data/length_buckets.h"
#include "train/class_weights.h"
#include "train/state_memory.h"
#include "train/optimizer_spec.h"
#include "train/resolve_recipe.h"

namespace gputrain {
namespace {

// What "best" means for this task, and the task options that cannot apply to it.
std::string check_task_options(const Config& c, const Dataset& train) {
  const bool regression = train.is_regression(), multilabel = train.multilabel();
  const std::string metric = c.monitor_metric == "auto" ? (regression ? "loss" : "accuracy") : c.monitor_metric;
  std::vector<std::string> problems;
  if (const Metric* m = find_metric(metric))  // the flag's values are the table's names
    if (const std::string misfit = metric_misfit(*m, regression, multilabel ? 0 : train.num_classes()); !misfit.empty()) {
      if (m->min_classes > 0 && !regression)
        problems.push_back(multilabel ? fmt::format("monitor_metric '{}' ranks one class per sample; this data has several "
                                                    "labels per sample (use f1 or accuracy)",
                                                    metric)
                                      : fmt::format("monitor_metric '{}' needs {} classes or more; this data has {}", metric,
                                                    m->min_classes, train.num_classes()));
      else
        problems.push_back(fmt::format("monitor_metric '{}' is for {}; {} ({})", metric,
                                       regression ? "classification" : "regression", misfit,
                                       regression ? "use loss, mae or rmse" : "use loss, accuracy or f1"));
    }
  // Macro-F1 counts a label per sample (or several); a label per token has none to count.
  const auto schema = train.named_fields();
  const bool per_token = schema && !multilabel && !schema->find(schema->target)->shape.empty();
  if (per_token && (metric == "f1" || (!c.until.empty() && parse_target(c.until).metric == "f1")))
    problems.push_back("f1 (macro-F1) counts a label per sample; this data has a label per token (use loss or accuracy)");
  if (!regression && c.loss != "auto" && !(multilabel && c.loss == "bce"))
    problems.push_back(multilabel ? fmt::format("--loss {}: several labels per sample train with bce", c.loss)
                                  : fmt::format("--loss {} is for {}; classification trains with cross-entropy", c.loss,
                                                c.loss == "bce" ? "several labels per sample (multi-label)" : "regression"));
  if (regression && c.loss == "bce") problems.push_back("--loss bce is for several 0/1 labels per sample; this data is regression");
  if (regression && c.num_classes > 0)
    problems.push_back(fmt::format("--num_classes {} is for classification; this data is regression", c.num_classes));
  if ((regression || multilabel) && (c.mixup > 0 || c.cutmix > 0))
    problems.push_back(std::string("--mixup and --cutmix mix one class label per sample; this data is ") +
                       (regression ? "regression" : "multi-label"));
  if (!problems.empty()) throw Error(problems, "see --task to change how the targets are read", kExitUsage);
  if (!c.until.empty()) check_target_applies(parse_target(c.until), regression, train.num_classes());
  return metric;
}

}  // namespace

void Session::build_trainer() {
  const Config& c = rc_.resolved;
  const Dataset& train = *data_->train;
  const Family& f = family(c.model);
  // Regression models output one value per target.
  const int64_t outputs = train.is_regression() ? train.target_numel() : train.num_classes();
  ModelSpec spec = model_spec(c, train.sample_shape(), outputs);
  if (train.named_fields()) spec.fields = std::make_shared<const SampleSchema>(schema_of(train));
  // A Hugging Face GPT-2's ids mean its own tokenizer's tokens: the data must use that vocabulary.
  if (init_weights_ && init_weights_->gpt.vocab > 0 && outputs != init_weights_->gpt.vocab)
    throw usage_error(fmt::format("the data's vocabulary of {} differs from the {} of --init_from '{}'", outputs,
                                  init_weights_->gpt.vocab, c.init_from),
                      "tokenize the data with the model's own tokenizer (its tokenizer.json)");
  NetPtr model = make_model(c.model, spec);
  if (init_weights_) init_report_ = load_init_weights(*model, f, *init_weights_, c.init_strict);
  init_weights_.reset();  // the file's copy is not needed any more
  // LoRA: adapters after the pretrained weights are in (the file has none); the rest is frozen.
  const std::vector<std::string> lora_frozen = c.lora_rank > 0 ? add_lora(*model, c.lora_rank, c.lora_alpha)
                                                                : std::vector<std::string>();
  if (is_model_file(c.model)) recipe_.report.push_back({"model file", imported_eval_note(c.model)});
  model->to(recipe_.device);
  if (recipe_.channels_last) to_channels_last(*model);
  frozen_ = c.lora_rank > 0 ? lora_frozen : frozen_parameters(*model, f, c.freeze);
  set_frozen(*model, frozen_, c.freeze_bn);
  // After the moves: the optimizer must hold the final tensors.
  auto optimizer = make_optimizer(optimizer_spec(c, recipe_.fused_optimizer), *model,
                                  lr_scale(c.layer_decay, c.backbone_lr_scale, f, *model));
  trainer_ = std::make_unique<Trainer>(
      model, std::move(optimizer), recipe_,
      TrainerOptions{c.clip_max_norm,
                     {c.loss, c.label_smoothing, c.huber_delta, c.mixup > 0 || c.cutmix > 0, recipe_.fused_head_loss,
                      class_weights_.defined() ? class_weights_.to(recipe_.device) : class_weights_},
                     c.ema_decay, c.skip_spikes});
  trainer_->add_hooks(fault_hooks(trainer_->scaler(), parallel_.mesh().ranks.rank));
}

Session::Session(const Config& requested, SessionOptions options)
    : rc_(requested), options_(std::move(options)), parallel_(options_.mesh) {
  pin(options_.pinned);
  auto problems = model_option_problems(rc_.resolved);  // before any data is read
  if (!problems.empty()) throw Error(problems, "drop the options the model does not use", kExitUsage);
  // A preset's --width sizes the built-in families; a model read from a file has its own.
  if (!family(rc_.resolved.model).width) rc_.not_applicable("width", "the model's layers come from " + rc_.resolved.model);

  machine_ = probe_machine(rc_.resolved.device != "cpu");
  rc_.record(parallel_.plan(rc_, machine_, options_.keep_global_batch));
  recipe_ = resolve_recipe(rc_, machine_);
  apply_global_switches(recipe_);
  parallel_.connect(rc_.resolved, recipe_);

  if (options_.init_weights && !rc_.resolved.init_from.empty())  // a bad file is refused before the data is read
    init_weights_ = read_init_weights(rc_.resolved.init_from, family(rc_.resolved.model), rc_.resolved.init_ema);
  if (init_weights_ && init_weights_->gpt.width > 0) shape_from_weights(*init_weights_);
  if (rc_.resolved.model == "gpt" || rc_.resolved.model == "llama") decide_lm_shape();
  data_ = options_.data ? options_.data : std::make_shared<const DataSplits>(make_datasets(rc_.resolved));
  // Token shards' labels are the next tokens already (data/token_dataset.h): shifted once more
  // they would train the token after next.
  if (family(rc_.resolved.model).shift_labels && rc_.resolved.dataset != "tokens") {
    auto shifted = std::make_shared<DataSplits>(*data_);
    shifted->train = shift_labels(data_->train);
    shifted->test = shift_labels(data_->test);
    data_ = shifted;
  }
  resolve_from_data();

  if (recipe_.cuda) cuda_reset_peak(recipe_.device.index());  // the run's peak memory is its own
  build_trainer();
  parallel_.compose(*trainer_, *data_, [this](int64_t batch_size) { return first_train_batch(batch_size); }, rc_,
                    recipe_, machine_);
  decide_attention_precision();  // before the AMP check, which then checks the attention that trains
  check_precision();  // before the batch-size search, which must search in the final precision
  search_batch_size();
  decide_accumulation();
  choose_num_workers();
  decide_buckets();
  // What each rank holds for training beyond activations: what data parallel replicates.
  // Sharded, beside what each rank would hold without it.
  Optimizer& optimizer = trainer_->optimizer();
  const StateMemory memory =
      expected_state_memory(trainer_->model(), optimizer, rc_.resolved.shard != "gradients", trainer_->ema());
  const int ranks = parallel_.mesh().ranks.world_size;
  std::string text = memory.text(optimizer);
  if (optimizer.sharded()) {
    const StateMemory whole = unsharded_state_memory(trainer_->model(), optimizer, trainer_->ema());
    text += fmt::format(" on rank {} (--shard {}); each rank of data parallel without it: {}", parallel_.mesh().ranks.rank,
                        rc_.resolved.shard, whole.text(optimizer));
  } else if (ranks > 1) {
    text += fmt::format(", on each of the {} ranks", ranks);
  }
  recipe_.report.push_back({"training state", text});
  settle_unused();
}

void Session::decide_buckets() {
  const Dataset& train = *data_->train;
  const Config& c = rc_.resolved;
  const bool lengths = train.size() > 0 && train.sample_length(0) >= 0;
  // 50 steps' samples a window, as Hugging Face's group_by_length (its megabatches): batches
  // of similar lengths, in an order still drawn anew each epoch. Counted in samples, so that the
  // order does not change with the batch size (a resume with another one continues the epoch).
  if (c.bucket_window == kAuto)
    rc_.decide("bucket_window", lengths && c.shuffle ? 50 * parallel_.global_batch_size(c.batch_size) : 0,
               !lengths    ? "samples of one length"
               : c.shuffle ? "texts vary in length: 50 steps' texts sorted by length pad little (Hugging Face's "
                             "group_by_length)"
                           : "--no-shuffle keeps the order");
  if (!lengths) return;
  LoaderOptions o = train_loader_options();
  const auto share = [&] { return 100 * padding_share(sample_order(train, o, 0), o.batch_size, train); };
  std::string row = fmt::format("{:.1f}% of the tokens in the first epoch's batches are padding", share());
  if (o.bucket_window > 0) {
    o.bucket_window = 0;
    row += fmt::format(" (windows of {} texts sorted by length; {:.1f}% unsorted)", c.bucket_window, share());
  } else {
    row += rc_.resolved.shuffle ? " (--bucket_window 0: not sorted by length)" : " (--no-shuffle: in the data's order)";
  }
  recipe_.report.push_back({"padding", row});
}

void Session::shape_from_weights(const InitWeights& w) {
  // The weights decide: a preset's --width (quickstart's 16) must not refuse them. The config
  // table shows any value they replaced as requested -> resolved, with this reason.
  const GptShape& g = w.gpt;
  const std::string why = "the weights' shape, from " + w.shape_from;
  rc_.decide("width", g.width, why);
  rc_.decide("depth", g.depth, why);
  rc_.decide("heads", g.heads, why);
  rc_.decide("positions", g.positions, why);
  if (!w.llama) return;
  const LlamaShape& l = *w.llama;
  rc_.decide("kv_heads", l.kv_heads, why);
  rc_.decide("mlp_width", l.mlp_width, why);
  rc_.decide("rope_theta", l.rope_theta, why);
  rc_.decide("norm_eps", l.norm_eps, why);
  rc_.decide("tie_embeddings", l.tied, why);
  rc_.decide("rope_scaling", l.rope_scaling.empty() ? std::string()
                                                    : fmt::format("{},{},{},{}", l.rope_scaling[0], l.rope_scaling[1],
                                                                  l.rope_scaling[2], l.rope_scaling[3]),
             why);
}

void Session::decide_lm_shape() {
  // Written into the record, so that eval, infer, generate, a resume and export --format hf
  // build and describe the same model (a later --seq_len within the positions reads the same
  // weights), whatever the defaults become.
  const Config& c = rc_.resolved;
  const std::string why = c.model + "'s default (GPT-2 small's shape)";
  if (c.width == 0) rc_.decide("width", 768, why);
  if (c.depth == 0) rc_.decide("depth", 12, why);
  if (c.heads == 0) rc_.decide("heads", 12, why);
  if (c.positions == 0 && c.seq_len > 0) rc_.decide("positions", c.seq_len, "the data's windows (--seq_len)");
  if (c.lora_rank > 0 && c.lora_alpha == 0)
    rc_.decide("lora_alpha", static_cast<double>(c.lora_rank), "the rank: a scale of 1, as PEFT's defaults (r 8, alpha 8)");
  if (c.model != "llama") return;
  if (c.kv_heads == 0) rc_.decide("kv_heads", rc_.resolved.heads, "--heads: one key/value head per query head");
  if (c.mlp_width == 0) rc_.decide("mlp_width", llama_mlp_width(rc_.resolved.width), "Llama's rule: 8/3 x --width, up to 256");
  if (c.rope_theta == 0) rc_.decide("rope_theta", kLlamaRopeTheta, "Hugging Face's LlamaConfig default");
  if (c.norm_eps == 0) rc_.decide("norm_eps", kLlamaNormEps, "as Llama 2 and 3 ship it");
}

void Session::settle_unused() {
  // Every value is decided by now, or belongs to a part this run does not have: that one reads
  // n/a, with why, never "auto".
  const Config& c = rc_.resolved;
  const nlohmann::json values = to_json(c);
  for (const auto& f : config_fields()) {
    // (A decided "auto" is a mode that ran, such as --balance auto, with its reason.)
    if (values[f.name] != "auto" || rc_.is_not_applicable(f.name) || !rc_.reason(f.name).empty()) continue;
    std::string why = "not used by this run";
    if (f.name == "amp_dtype")
      why = c.use_amp ? "mixed precision is off on this device" : "mixed precision is off (--no-use_amp)";
    else if (f.name == "micro_batches")
      why = "no pipeline stages (--pipeline_stages 1)";
    else if (f.name == "stem")
      why = "model " + c.model + " has no stem to choose";
    rc_.not_applicable(f.name, why);
  }
}

void Session::check_precision() {
  if (!recipe_.precision.amp) return;
  if (!options_.amp_fallback.empty() && recipe_.precision.scaler)
    fall_back_amp(options_.amp_fallback + " (earlier in this run)");
  if (!recipe_.precision.amp || !options_.check_amp || !rc_.resolved.amp_check) return;
  const auto batch = first_train_batch(rc_.resolved.batch_size);  // the same on every rank: all decide alike
  while (recipe_.precision.amp && batch) {
    const AmpCheckResult r = check_amp(*trainer_, *batch, recipe_.precision.dtype, recipe_.precision.scaler, {.lr = rc_.resolved.lr});
    if (!r.ok) {
      fall_back_amp("the AMP check: " + r.summary);
      continue;
    }
    auto amp_row = std::find_if(recipe_.report.begin(), recipe_.report.end(), [](const auto& row) { return row.first == "AMP"; });
    recipe_.report.insert(amp_row == recipe_.report.end() ? amp_row : amp_row + 1, {"AMP check", r.summary});
    break;
  }
}

void Session::decide_attention_precision() {
  const Config& c = rc_.resolved;
  set_cpu_attention_fp32(false);
  std::string why;
  if (c.model != "gpt" && c.model != "llama")
    why = "n/a for " + c.model + " (gpt and llama only)";
  else if (!recipe_.precision.amp)
    why = "n/a without autocast (attention runs in fp32)";
  else if (recipe_.cuda)
    why = "n/a on GPUs (attention runs in the autocast dtype, which the fused kernels are for)";
  const int64_t tokens = c.seq_len > 0 ? c.seq_len : c.positions;  // ragged texts: the longest context
  const int64_t head_size = c.heads > 0 ? c.width / c.heads : 0;
  // The fused kernel that runs attention, as ATen picks it for this shape, dtype and device.
  const auto report_kernel = [&](bool fp32) {
    if (tokens <= 0 || head_size <= 0) return;
    const auto dtype = recipe_.precision.amp && !fp32 ? recipe_.precision.dtype : torch::kFloat;
    recipe_.report.push_back({"attention kernel", fmt::format("{} (at::_fused_sdp_choice, 1 x {} heads x {} x {}, {})",
                                                              attention_kernel(c.heads, tokens, head_size, dtype,
                                                                               recipe_.device, c.dropout),
                                                              c.heads, tokens, head_size, c10::toString(dtype))});
  };
  if (!why.empty()) {
    if (c.model == "gpt" || c.model == "llama") report_kernel(false);
    if (c.attention_precision == "fp32")
      fmt::print(stderr, "gputrain: --attention_precision fp32 has no effect here: {}\n", why);
    rc_.not_applicable("attention_precision", why);
    return;
  }
  bool fp32 = c.attention_precision == "fp32";
  std::string line = fmt::format("{} (--attention_precision {})", fp32 ? "fp32, inputs widened" : "bf16", c.attention_precision);
  if (c.attention_precision == "auto" && tokens <= 0) {
    line = "bf16: no fixed number of tokens to time at (ragged texts, no --positions)";
    rc_.decide("attention_precision", "amp", line);
  } else if (c.attention_precision == "auto") {
    // The training micro-batch's shape (a later --batch_size auto search changes only B).
    const AttentionTiming t = time_cpu_attention(c.batch_size, c.heads, tokens, head_size);
    fp32 = t.fp32_ms < t.bf16_ms;
    line = fmt::format("{}: a forward and backward at {} x {} heads x {} x {} took {:.1f} ms in fp32, {:.1f} ms in bf16",
                       fp32 ? "fp32" : "bf16", c.batch_size, c.heads, tokens, head_size, t.fp32_ms, t.bf16_ms);
    rc_.decide("attention_precision", fp32 ? "fp32" : "amp", line);
  }
  set_cpu_attention_fp32(fp32);
  recipe_.report.push_back({"attention", line});
  report_kernel(fp32);
}

std::string Session::fall_back_amp(const std::string& why) {
  const std::string to = fall_back_precision(rc_, recipe_, machine_, why);
  trainer_->precision_changed();
  return to;
}

void Session::choose_num_workers() {
  const bool workers = rc_.resolved.num_workers == kAuto, prefetch = rc_.resolved.prefetch_factor == kAuto;
  if (!workers && !prefetch) return;  // with --num_workers 0 the recipe has decided the prefetch
  auto choice = choose_workers(*trainer_, data_->train, train_loader_options(), machine_.cpu_cores);
  std::vector<std::string> waits;
  for (const auto& t : choice.trials)
    waits.push_back(prefetch && t.workers > 0 ? fmt::format("{} x {}: {:.1f}%", t.workers, t.prefetch, 100 * t.wait_fraction)
                                              : fmt::format("{}: {:.1f}%", t.workers, 100 * t.wait_fraction));
  const std::string why =
      fmt::format("auto: data wait by loader threads{} {} ({} steps each); the fewest under 5%",
                  prefetch ? " x batches in flight" : "", join(waits, ", "), choice.steps);
  if (workers) rc_.decide("num_workers", choice.workers, why);
  if (prefetch) rc_.decide("prefetch_factor", choice.prefetch, why);
  const Config& c = rc_.resolved;
  for (auto& [what, state] : recipe_.report)
    if (what == "loader")
      state = (c.num_workers == 0 ? std::string("main thread")
                                  : fmt::format("{} threads, prefetch {}", c.num_workers, c.prefetch_factor)) +
              " (" + why + ")";
}

void Session::pin(const nlohmann::json& pinned) {
  if (!pinned.is_object()) return;
  const Config& c = rc_.requested;
  if (c.auto_batch_size && pinned.contains("batch_size"))
    rc_.decide("batch_size", pinned["batch_size"], "auto_batch_size: kept from the run's first search");
  // The model's stem, as its weights have it (decided from the data, or from --init_from's file).
  if (c.stem == "auto" && pinned.value("stem", "auto") != "auto" && family(c.model).stem)
    rc_.decide("stem", pinned["stem"], "as the run's weights have it");
  // A language model's shape as the run decided it (decide_lm_shape, or from a Hugging Face
  // folder's config.json): eval, infer, generate and a resume build the model the weights fit.
  if (c.model == "gpt" || c.model == "llama") {
    const nlohmann::json requested = to_json(c);
    for (const char* name : {"width", "depth", "heads", "positions", "kv_heads", "mlp_width", "rope_theta", "rope_scaling",
                             "norm_eps", "tie_embeddings"})
      if (pinned.contains(name) && requested.contains(name) && pinned[name] != requested[name] &&
          (pinned[name].is_number() ? requested[name].is_number() : pinned[name].type() == requested[name].type()))
        rc_.decide(name, pinned[name], "as the run's weights have it");
  }
  // The sample order: a resume goes on with the run's (a run from before length buckets had none).
  if (c.bucket_window == kAuto) {
    const int64_t window = pinned.value("bucket_window", int64_t{0});
    if (window != kAuto) rc_.decide("bucket_window", window, "the run's sample order");
  }
  // The model's outputs: a resume keeps them, and the data must still fit them.
  if (c.num_classes == 0 && pinned.value("num_classes", 0) > 0)
    rc_.decide("num_classes", pinned["num_classes"], "classes in the training data at the run's start");
  if (c.normalize && c.normalize_mean.empty() && pinned.value("normalize_mean", "") != "") {
    rc_.decide("normalize_mean", pinned["normalize_mean"], "computed from the training data at the run's start");
    rc_.decide("normalize_std", pinned["normalize_std"], "computed from the training data at the run's start");
  }
}

void Session::resolve_from_data() {
  const Config c = rc_.resolved;
  const Dataset& train = *data_->train;
  if (c.normalize && c.normalize_mean.empty() && !data_->normalize_mean.empty()) {
    rc_.decide("normalize_mean", data_->normalize_mean, "computed from the training data");
    rc_.decide("normalize_std", data_->normalize_std, "computed from the training data");
  }
  const std::string task = train.is_regression() ? "regression" : train.multilabel() ? "multilabel" : "classification";
  if (c.task == "auto") rc_.decide("task", task, "from the training targets");
  // Length buckets sort a shuffled epoch (decide_buckets, once the batch size is known).
  const bool lengths = train.size() > 0 && train.sample_length(0) >= 0;
  if (c.bucket_window > 0 && (!lengths || !c.shuffle))
    throw usage_error(fmt::format("--bucket_window {}: {}", c.bucket_window,
                                  !lengths ? "the samples of --dataset " + c.dataset + " do not vary in length"
                                           : std::string("--no-shuffle keeps the data's order, which buckets would sort")),
                      "drop it (it sorts the shuffled texts of --dataset text by length)");
  if (c.mixup > 0 || c.cutmix > 0)
    if (!c.class_weights.empty())
      throw usage_error("--class_weights with --mixup or --cutmix: mixed labels are distributions, which the weights do not weigh",
                        "drop one of them");
  class_weights_ = class_weights(c.class_weights, train);
  if (train.named_fields() && c.normalize)
    rc_.not_applicable("normalize", "named fields (ids, masks, labels) are taken as the data holds them");
  // A captured graph holds one batch shape; padded batches change it with their longest sample.
  const SampleSchema schema = schema_of(train);
  if (recipe_.cuda_graphs && schema.varies()) {
    std::vector<std::string> varying;
    for (const auto& f : schema.fields)
      if (f.varies()) varying.push_back(f.name);
    const std::string why = "the data's " + join(varying, ", ") +
                            " vary in length: each batch is padded to its own longest, and a graph holds one shape";
    recipe_.cuda_graphs = false;
    rc_.decide("cuda_graphs", false, why);
    for (auto& [what, state] : recipe_.report)
      if (what == "CUDA graphs") state = "off: " + why;
  }
  if (!train.is_regression() && c.num_classes != train.num_classes())
    rc_.decide("num_classes", train.num_classes(),
               c.dataset == "synthetic" ? "synthetic default"
               : c.dataset == "tokens"  ? "the tokenizer's vocabulary"
                                        : "classes in the training data");
  if (c.dataset == "tokens" && c.vocab_size == 0 && tokenizer_of(c) != c.tokenizer)  // export copies the one read
    rc_.decide("tokenizer", tokenizer_of(c), c.tokenizer.empty() ? "beside the training shards" : "--tokenizer, absolute");
  if (c.sample_every > 0) {  // refused here, before a run folder is written, not at the first sample
    const std::string& tokenizer = rc_.resolved.tokenizer;  // as just decided
    if (tokenizer.empty())
      throw usage_error("--sample_every writes text, and this run has no tokenizer to write it with (--vocab_size "
                        "without --tokenizer)",
                        "give --tokenizer FILE (the shards' tokenizer.json), or drop --sample_every");
    TokenDecoder::load(tokenizer);
  }
  const std::string metric = check_task_options(c, train);
  // The default preset smooths Fashion-MNIST's labels; a regression loss has none to smooth, and
  // the config table says so rather than the run refusing the preset it did not choose.
  if (train.is_regression() && c.label_smoothing > 0)
    rc_.not_applicable("label_smoothing", "regression: the loss has no class labels to smooth");
  if (train.multilabel() && c.label_smoothing > 0)
    rc_.not_applicable("label_smoothing", "several labels per sample: each label's binary cross-entropy has no classes to smooth");
  if (c.monitor_metric == "auto")
    rc_.decide("monitor_metric", metric, train.is_regression() ? "regression: the loss" : "classification");
  if (c.loss == "auto")
    rc_.decide("loss", train.is_regression() ? "mse" : train.multilabel() ? "bce" : "cross_entropy",
               train.is_regression() ? "regression targets" : train.multilabel() ? "several 0/1 labels per sample" : "class labels");
  const auto shape = train.sample_shape();
  if (family(c.model).stem && c.stem == "auto" && shape.size() == 3 && rc_.reason("stem").empty()) {
    // Pretrained weights bring their stem (a 7x7 conv1 is ImageNet's, whatever the image size).
    auto [stem, why] = init_weights_ ? stem_from_weights(*init_weights_, family(c.model)) : std::pair<std::string, std::string>{};
    if (stem.empty()) std::tie(stem, why) = choose_stem(shape);
    rc_.decide("stem", stem, why);
  }
}

void Session::decide_accumulation() {
  // After the batch-size search and with the world known: a step of --tokens_per_step tokens
  // whatever the batch fits and however many ranks run (an elastic restart keeps it).
  const Config& c = rc_.resolved;
  if (c.tokens_per_step <= 0) return;
  // A searched batch size (the largest that fit, less a margin) is rounded down to one whose
  // micro-steps make the step's tokens exactly.
  if (c.auto_batch_size && rc_.reason("batch_size").rfind("largest that fit", 0) == 0) {
    const int64_t unit = parallel_.global_batch_size(1) * c.seq_len;  // the tokens of 1 sample on every rank
    int64_t b = c.batch_size;
    while (b > 1 && c.tokens_per_step % (b * unit) != 0) --b;
    if (b != c.batch_size)
      rc_.decide("batch_size", b,
                 fmt::format("{}; rounded down to divide --tokens_per_step {}", rc_.reason("batch_size"), c.tokens_per_step));
  }
  const int64_t global = global_batch_size(), micro = global * c.seq_len;  // every rank's batch
  if (c.tokens_per_step % micro != 0)
    throw usage_error(fmt::format("--tokens_per_step {} is not a multiple of the tokens of one micro-step: {} = {} "
                                  "sample(s) of --seq_len {} (--batch_size {} on every rank)",
                                  c.tokens_per_step, micro, global, c.seq_len, c.batch_size),
                      fmt::format("a multiple of {}, or a --batch_size that divides it", micro));
  rc_.decide("accumulation_steps", c.tokens_per_step / micro,
             fmt::format("--tokens_per_step {} / ({} sample(s) x {} tokens a micro-step, all ranks)", c.tokens_per_step,
                         global, c.seq_len));
  for (auto& [what, state] : recipe_.report)  // the device report was written with the flags' accumulation
    if (what == "gradient accumulation")
      state = fmt::format("{} micro-batches (effective batch {}; --tokens_per_step {})", c.accumulation_steps,
                          c.accumulation_steps * c.batch_size, c.tokens_per_step);
}

void Session::search_batch_size() {
  const Config& c = rc_.resolved;
  if (!rc_.resolved.auto_batch_size || !rc_.reason("batch_size").empty()) return;  // not asked, or pinned
  if (!options_.search_batch_size) {
    rc_.decide("batch_size", c.batch_size, "auto_batch_size: searched only by train");
    return;
  }
  // The simulated memory limit of the tests makes the search testable on a CPU.
  if (!recipe_.cuda && faults().oom_above < 0) {
    rc_.decide("batch_size", c.batch_size, "auto_batch_size: n/a on cpu (no device memory limit)");
    return;
  }
  const Dataset& train = *data_->train;
  auto found = find_batch_size(*trainer_, train, c.batch_size, train.size() / c.accumulation_steps);
  batch_search_ = {{"event", "auto_batch_size"},
                   {"step", 0},
                   {"epoch", 0},
                   {"batch_size", found.batch_size},
                   {"largest_fit", found.largest_fit},
                   {"trials", found.trials}};
  rc_.decide(
      "batch_size", found.batch_size,
      fmt::format("largest that fit: {}, minus a 10% margin; {} probes", found.largest_fit, found.trials.size()));
}

LoaderOptions Session::train_loader_options() const {
  const Config& c = rc_.resolved;
  LoaderOptions o;
  o.batch_size = c.batch_size;
  o.shuffle = c.shuffle;
  o.drop_last = c.drop_last;
  o.num_workers = c.num_workers;
  o.prefetch_factor = c.prefetch_factor;
  o.persistent_workers = c.persistent_workers;
  o.pin_memory = recipe_.pin_memory;
  o.seed = static_cast<uint64_t>(c.seed);
  o.device = recipe_.device;
  o.non_blocking = recipe_.non_blocking;
  o.channels_last = recipe_.channels_last;
  o.mix = {c.mixup, c.cutmix, c.mixup_prob, c.mixup_switch_prob, c.label_smoothing, data_->train->num_classes()};
  o.bucket_window = c.bucket_window;
  parallel_.shard(o);
  return o;
}

int64_t Session::steps_per_epoch() const {
  return batches_per_epoch(data_->train->size(), train_loader_options()) / rc_.resolved.accumulation_steps;
}

std::unique_ptr<StepBatches> Session::benchmark_batches(int64_t cycle_steps) const {
  LoaderOptions o = train_loader_options();
  o.drop_last = o.persistent_workers = true;  // whole batches only; threads live across epochs
  auto batches = std::make_unique<StepBatches>(data_->train, o, rc_.resolved.accumulation_steps);
  batches->run_endless(cycle_steps);
  return batches;
}

std::optional<Batch> Session::first_train_batch(int64_t batch_size) const {
  LoaderOptions o = eval_loader_options(batch_size);  // in order, rank 0's view
  o.num_workers = 0;
  Loader loader(data_->train, o);
  loader.start_epoch(0);
  return loader.next();
}

LoaderOptions Session::eval_loader_options(int64_t batch_size, bool sharded) const {
  LoaderOptions o = train_loader_options();
  o.batch_size = batch_size;
  o.shuffle = o.drop_last = false;
  o.mix = {};  // evaluation reads the labels as they are
  o.bucket_window = 0;
  o.rank_batch_sizes.clear();
  o.each_sample_once = sharded;
  if (!sharded) {
    o.rank = 0;
    o.world_size = 1;
  }
  return o;
}

std::string Session::describe_line() const {
  auto row = [&](const std::string& what) {
    for (const auto& [name, state] : recipe_.report)
      if (name == what) return state;
    return std::string();
  };
  return fmt::format("device {} | precision {} | channels_last {} | data {} | model {}, {} parameters", row("device"),
                     recipe_.precision.why, row("channels_last"), data_->description, rc_.resolved.model,
                     parameter_count(trainer_->model()));
}

}  // namespace gputrain
