// The table of configuration fields and the code that sets them from JSON and from flags.
#include "config/fields.h"

#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/metric.h"
#include "core/text.h"

namespace gputrain {
namespace {

using C = Config;

// Choices shared with other modules (the dataset factory tests that they agree with this list).
// The models are the families' own (models/family.h): checked where a model is built.
const std::vector<std::string> kDatasets = {"fashion-mnist", "mnist", "cifar10",    "cifar100",  "image_folder",
                                            "webdataset",    "csv",   "npy",        "jsonl",     "text",
                                            "tokens",        "synthetic"};

std::vector<Field> make_fields() {
  // Hyperparameters meet float32 weights in the update: a larger value cannot be converted
  // (LibTorch refuses it mid-step), so it is refused here, with the range.
  const double float_max = std::numeric_limits<float>::max();
  return {
      {"preset", &C::preset, "source", "workload preset name (gputrain presets), auto, or a path to a .json file"},
      {"config", &C::config, "source", "JSON file applied after the preset"},
      {"device_preset", &C::device_preset, "source",
       "device recipe under the preset: auto (from the GPU found), none, or a device preset (t4, a100, ...)"},

      {"dataset", &C::dataset, "data", "dataset format", kDatasets},
      {"data_dir", &C::data_dir, "data",
       "dataset folder (default /usr/share/datasets/<dataset>); webdataset: the training shards, e.g. "
       "'shards/train-{000000..000127}.tar' or 'shards/train-*.tar'"},
      {"train_file", &C::train_file, "data", "csv/npy: training file (.csv, .npy or .npz)"},
      {"test_file", &C::test_file, "data",
       "csv/npy: test file; webdataset: the evaluation shards, as --data_dir (default: hold out --val_split)"},
      {"train_targets", &C::train_targets, "data", "npy: .npy of training targets (when train_file is .npy)"},
      {"test_targets", &C::test_targets, "data", "npy: .npy of test targets"},
      {"target", &C::target, "data", "csv: target column(s), comma-separated; jsonl: the target field (default labels, label or y)"},
      {"features", &C::features, "data", "csv: feature columns, comma-separated (default: all others)"},
      {"task",
       &C::task,
       "data",
       "auto (from the targets), classification, multilabel (several 0/1 labels per sample) or regression",
       {"auto", "classification", "multilabel", "regression"}},
      {"window", &C::window, "data", "csv: rows per sliding window over a time series (0 = tabular rows)", {}, 0, 1e6},
      {"stride", &C::stride, "data", "csv: rows between window starts", {}, 1, 1e9},
      {"horizon", &C::horizon, "data", "csv: predict the target this many rows after a window", {}, 0, 1e9},
      {"seq_len", &C::seq_len, "data",
       "tokens: tokens per sample window, the model's context (inputs; the labels are the next tokens)", {}, 0, 1 << 20},
      {"vocab_size", &C::vocab_size, "data", "tokens: the vocabulary size (default: from the tokenizer)", {}, 0, 1 << 30},
      {"tokenizer", &C::tokenizer, "data",
       "tokens: the shards' tokenizer.json (default: tokenizer.json beside the training shards); text: the SentencePiece "
       ".model (or the model folder holding it) that tokenizes a .csv/.tsv/.jsonl table"},
      {"text_column", &C::text_column, "data",
       "text: the table's text column, or two comma-separated for text pairs (e.g. premise,hypothesis)"},
      {"label_column", &C::label_column, "data",
       "text: the table's label column (class names or ids, or numbers with a fraction: regression), or several "
       "comma-separated columns of 0/1 (multi-label); a test table without them holds new texts (infer)"},
      {"max_length", &C::max_length, "data", "text: tokens per text of a table, special tokens included; longer texts are cut and counted",
       {}, 2, 1 << 20},
      {"eval_tokens", &C::eval_tokens, "data", "tokens: evaluate on the first this many val tokens (0 = all)", {}, 0,
       1e15},
      {"image_size", &C::image_size, "data", "image size HxW or N (image_folder/webdataset decode size; resizes others)"},
      {"crop_pct", &C::crop_pct, "data",
       "image_folder/webdataset evaluation images (val/ folder, --test_file or a held-out part): resize the short "
       "side to image_size / crop_pct, then center-crop image_size, as timm's --crop-pct (0.875 is the ImageNet "
       "recipe's; 0 = resize the whole image)",
       {}, 0, 1},
      {"image_channels", &C::image_channels, "data", "image_folder/webdataset: 3 (RGB) or 1 (grayscale)", {}, 1, 3},
      {"val_split",
       &C::val_split,
       "data",
       "fraction of the training data held out for evaluation (0 = off)",
       {},
       0,
       0.9},
      {"max_image_pixels", &C::max_image_pixels, "data",
       "image_folder/webdataset: refuse images with more pixels than this (a corrupt or hostile header)", {}, 1, 1e12},
      {"skip_bad_samples", &C::skip_bad_samples, "data", "skip and count unreadable images instead of stopping"},
      {"cache", &C::cache, "data", "keep decoded samples in memory after their first read"},
      {"input_shape", &C::input_shape, "data", "synthetic sample shape, e.g. 3x32x32, 64x8 (sequence), 20 (table)"},
      {"num_classes", &C::num_classes, "data", "classes: the model's outputs, every label below it (0 = from the labels; synthetic 10)", {}, 0, 100000},
      {"synthetic_train_size", &C::synthetic_train_size, "data", "synthetic train samples", {}, 1, 1e9},
      {"synthetic_test_size", &C::synthetic_test_size, "data", "synthetic test samples", {}, 1, 1e9},
      {"normalize", &C::normalize, "data", "normalize inputs per channel (image) or feature (table)"},
      {"normalize_mean", &C::normalize_mean, "data", "per-channel means (default: computed from the training data)"},
      {"normalize_std", &C::normalize_std, "data", "per-channel stds (default: computed from the training data)"},
      {"random_crop", &C::random_crop, "data", "random crop padding in pixels (0 = off)", {}, 0, 64},
      {"random_resized_crop", &C::random_resized_crop, "data",
       "train images: a random box (--rrc_scale of the area, --rrc_ratio width/height) resized to the image size, "
       "as torchvision's RandomResizedCrop"},
      {"rrc_scale", &C::rrc_scale, "data", "--random_resized_crop: the box's share of the image's area, MIN,MAX"},
      {"rrc_ratio", &C::rrc_ratio, "data", "--random_resized_crop: the box's width / height, MIN,MAX"},
      {"reduced_decode", &C::reduced_decode, "data",
       "image_folder/webdataset crops: decode JPEGs at the smallest DCT scale that covers the output, only the crop's rows "
       "and columns (off: whole, torchvision's pixels)"},
      {"shuffle_buffer", &C::shuffle_buffer, "data",
       "webdataset: samples the shuffled stream draws from (reads stay this close to the stream)", {}, 1, 1 << 24},
      {"hflip", &C::hflip, "data", "random horizontal flip"},
      {"aa", &C::aa, "data",
       "train images: torchvision's RandAugment as rand-mM-nN (N operations at magnitude bin M of 31, e.g. "
       "rand-m9-n2) or TrivialAugmentWide as trivialaugmentwide (empty = off)"},
      {"reprob", &C::reprob, "data",
       "random erasing: chance per training image of boxes of 2-33% of its area replaced (timm's --reprob)", {}, 0, 1},
      {"remode", &C::remode, "data", "random erasing fill: const (zeros), rand (a normal value per channel), pixel "
       "(normal noise)", {"const", "rand", "pixel"}},
      {"recount", &C::recount, "data", "random erasing: 1 to this many boxes per erased image, as timm", {}, 1, 16},
      {"mixup", &C::mixup, "data", "MixUp on training batches: Beta(alpha, alpha) weights, e.g. 0.8 (0 = off)", {}, 0,
       100},
      {"cutmix", &C::cutmix, "data", "CutMix on training batches: Beta(alpha, alpha) areas, e.g. 1.0 (0 = off)", {}, 0,
       100},
      {"mixup_prob", &C::mixup_prob, "data", "MixUp/CutMix: chance that a batch is mixed", {}, 0, 1},
      {"mixup_switch_prob", &C::mixup_switch_prob, "data",
       "with --mixup and --cutmix: chance of CutMix rather than MixUp for a batch", {}, 0, 1},
      {"color_jitter", &C::color_jitter, "data", "brightness[,contrast[,saturation[,hue]]], e.g. 0.4,0.4,0.4,0.1"},
      {"log1p", &C::log1p, "data", "sign(x)*log(1+|x|) on inputs (count data)"},

      {"batch_size", &C::batch_size, "loader", "samples per micro-batch", {}, 1, 1 << 20},
      {"auto_batch_size", &C::auto_batch_size, "loader", "find the largest micro-batch that fits in GPU memory"},
      {"eval_batch_size", &C::eval_batch_size, "loader", "samples per evaluation batch", {}, 1, 1 << 20},
      {"num_workers", &C::num_workers, "loader",
       "loader threads (0 = main thread; auto = the fewest that keep data wait under 5%, measured at start)", {}, 0,
       256, true},
      {"prefetch_factor", &C::prefetch_factor, "loader",
       "batches in flight per worker (auto = the smallest of 1, 2, 4 that keeps data wait under 5%, measured at start)",
       {}, 1, 64, true},
      {"persistent_workers", &C::persistent_workers, "loader", "keep loader threads between epochs"},
      {"pin_memory", &C::pin_memory, "loader", "page-locked host batches (CUDA only)"},
      {"non_blocking", &C::non_blocking, "loader", "asynchronous host-to-device copies (CUDA only)"},
      {"drop_last", &C::drop_last, "loader", "drop the last incomplete training batch"},
      {"shuffle", &C::shuffle, "loader", "reshuffle the training set every epoch"},
      {"bucket_window", &C::bucket_window, "loader",
       "samples of varying length (texts): sort each window of this many samples of the shuffled epoch by length, so "
       "batches pad little (0 = off; auto = 50 steps' samples for --dataset text, as Hugging Face's group_by_length)",
       {}, 0, 1 << 20, true},

      {"model", &C::model, "model",
       "model family (gputrain models lists them), or a torch.export program file net.pt2 (tools/export_model.py; "
       "a TorchScript net.pt needs --trust_program)",
       {/* set_model_choices */}},
      {"output_name", &C::output_name, "model",
       "a --model program that returns a tuple or a dict: the output to train (its key, or its position from 0; "
       "default the first)"},
      {"width", &C::width, "model", "base width (0 = the model's default)", {}, 0, 65536},
      {"depth",
       &C::depth,
       "model",
       "layers (lstm, gru, transformer) or blocks (cnn3d); 0 = the model's default",
       {},
       0,
       1000},
      {"stem",
       &C::stem,
       "model",
       "resnet stem: small (3x3, no max-pool), imagenet (7x7/2 + max-pool); auto: small up to 64 px",
       {"auto", "small", "imagenet"}},
      {"heads", &C::heads, "model", "transformer and gpt attention heads (0 = 4, gpt 12; must divide --width)", {}, 0, 1024},
      {"positions", &C::positions, "model", "gpt: learned positions, the longest context; llama: the longest context "
       "(0 = --seq_len)", {}, 0, 1 << 20},
      {"kv_heads", &C::kv_heads, "model", "llama: key/value heads, grouped-query attention (0 = --heads; must divide "
       "--heads)", {}, 0, 1024},
      {"mlp_width", &C::mlp_width, "model", "llama: the MLP's inner width (0 = 8/3 x --width rounded up to 256, "
       "Llama's rule)", {}, 0, 1 << 20},
      {"rope_theta", &C::rope_theta, "model", "llama: the rotary positions' base (0 = 10000; Llama 3: 500000)", {}, 0,
       1e12},
      {"rope_scaling", &C::rope_scaling, "model", "llama: Llama 3's rope_scaling as factor,low_freq_factor,"
       "high_freq_factor,original_positions, e.g. 32,1,4,8192 (empty = none)"},
      {"norm_eps", &C::norm_eps, "model", "llama: RMSNorm's epsilon (0 = 1e-5)", {}, 0, 1},
      {"tie_embeddings", &C::tie_embeddings, "model", "llama: the head is the token embedding, one tensor "
       "(tie_word_embeddings; gpt's always is)"},
      {"dropout", &C::dropout, "model", "dropout in transformer layers and between lstm/gru layers", {}, 0, 0.95},
      {"grad_checkpointing", &C::grad_checkpointing, "model",
       "recompute resnet blocks / transformer layers in backward: less activation memory, more compute"},
      {"fused_head_loss", &C::fused_head_loss, "model",
       "gpt: compute the head (logits over the vocabulary) with the loss, a chunk of tokens at a time, so the full "
       "logits and their gradient are never held"},
      {"trust_program", &C::trust_program, "model",
       "load a TorchScript --model net.pt: a program whose code runs when it is loaded, so only one whose author you "
       "trust (a torch.export net.pt2 runs as data and needs no trust); a command-line flag only, for train, eval "
       "and infer alike"},

      {"init_from", &C::init_from, "finetune",
       "start the model from these weights: safetensors, a torch.save state_dict (.pt/.pth/.bin) or a gputrain "
       "checkpoint, told apart by content (also --initial-checkpoint, timm's spelling)"},
      {"init_ema", &C::init_ema, "finetune", "--init_from a checkpoint's moving average (EMA) instead of its weights"},
      {"init_strict", &C::init_strict, "finetune",
       "every tensor but the head's must match by name and shape (false: load what matches, report the rest)"},
      {"freeze", &C::freeze, "finetune",
       "parameters that do not train: comma-separated name prefixes (layer1,layer2) or backbone (all but the head)"},
      {"unfreeze_at_epoch", &C::unfreeze_at_epoch, "finetune",
       "the epoch (counted from 0) from which the frozen parameters train too (0 = never)", {}, 0, 1e9},
      {"freeze_bn", &C::freeze_bn, "finetune", "BatchNorm layers of frozen parts keep their running statistics"},
      {"layer_decay", &C::layer_decay, "finetune",
       "layer-wise lr decay as timm's --layer-decay: layer i of L trains at lr x decay^(L-1-i), the head at lr (0 = off)",
       {}, 0, 1},
      {"backbone_lr_scale", &C::backbone_lr_scale, "finetune",
       "learning-rate multiplier of everything but the head (1 = the same lr)", {}, 0, 1e6},
      {"lora_rank", &C::lora_rank, "finetune",
       "gpt, llama: train LoRA adapters of this rank on every attention and MLP projection, the rest frozen; "
       "export merges them (0 = off)", {}, 0, 65536},
      {"lora_alpha", &C::lora_alpha, "finetune", "LoRA: the adapters' output is scaled by alpha / rank (0 = the rank)",
       {}, 0, 1e6},

      {"optimizer", &C::optimizer, "optim", "optimizer", {"sgd", "adam", "adamw"}},
      {"lr", &C::lr, "optim", "peak learning rate", {}, 0, float_max},
      {"momentum", &C::momentum, "optim", "SGD momentum", {}, 0, 1},
      {"nesterov", &C::nesterov, "optim", "Nesterov momentum (SGD)"},
      {"weight_decay", &C::weight_decay, "optim", "weight decay (not applied to biases and norms)", {}, 0, float_max},
      {"beta1", &C::beta1, "optim", "Adam beta1", {}, 0, 1},
      {"beta2", &C::beta2, "optim", "Adam beta2", {}, 0, 1},
      {"lr_schedule", &C::lr_schedule, "optim", "learning-rate schedule", {"constant", "step", "cosine", "onecycle"}},
      {"warmup_steps", &C::warmup_steps, "optim", "linear warm-up steps", {}, 0, 1e12},
      {"lr_step_size", &C::lr_step_size, "optim", "epochs between decays (step schedule)", {}, 1, 1e9},
      {"lr_gamma", &C::lr_gamma, "optim", "decay factor (step schedule)", {}, 0, 1},
      {"min_lr", &C::min_lr, "optim", "final learning rate (cosine, onecycle)", {}, 0, float_max},
      {"epochs", &C::epochs, "optim", "passes over the training set", {}, 1, 1e9},
      {"max_steps", &C::max_steps, "optim", "stop after this many optimizer steps (0 = no limit)", {}, 0, 1e15},
      {"accumulation_steps", &C::accumulation_steps, "optim", "micro-batches per optimizer step", {}, 1, 65536},
      {"tokens_per_step", &C::tokens_per_step, "optim",
       "tokens: the tokens an optimizer step trains on (GPT-2: 524288); decides --accumulation_steps = this / "
       "(batch_size x seq_len x ranks), which must divide it (0 = not used)",
       {}, 0, int64_t{1} << 40},
      {"clip_max_norm", &C::clip_max_norm, "optim", "clip the gradient norm after unscaling (0 = off)", {}, 0, float_max},
      {"label_smoothing", &C::label_smoothing, "optim", "cross-entropy label smoothing", {}, 0, 1},
      {"loss",
       &C::loss,
       "optim",
       "loss (auto: cross-entropy for classes, bce for several labels, mse for values)",
       {"auto", "mse", "l1", "huber", "bce"}},
      {"class_weights", &C::class_weights, "optim",
       "classification: weigh each class's loss (cross-entropy's weight; multi-label: BCE's pos_weight): balanced "
       "(inverse class frequency, as scikit-learn's; multi-label: negatives/positives per label) or one weight per "
       "class, comma-separated; the evaluation loss stays unweighted"},
      {"huber_delta", &C::huber_delta, "optim", "Huber loss threshold", {}, 1e-9, float_max},
      {"monitor_metric",
       &C::monitor_metric,
       "optim",
       "metric for the best checkpoint and early stopping",
       [] {
         auto names = metric_names();  // core/metric.h's table, and auto
         names.insert(names.begin(), "auto");
         return names;
       }()},
      {"ema_decay",
       &C::ema_decay,
       "optim",
       "exponential moving average of the weights, e.g. 0.999 (0 = off)",
       {},
       0,
       0.999999},
      {"skip_spikes",
       &C::skip_spikes,
       "optim",
       "skip the update of a step whose loss exceeds F x the running mean of earlier losses, e.g. 3 (0 = off)",
       {},
       0,
       float_max},
      {"early_stopping",
       &C::early_stopping,
       "optim",
       "stop after N evaluations without improvement (0 = off)",
       {},
       0,
       1e9},
      {"eval_every", &C::eval_every, "optim",
       "also evaluate every N steps inside an epoch (no checkpoint; 0 = at epoch ends only)", {}, 0, 1e12},
      {"sample_every", &C::sample_every, "optim",
       "gpt: every N steps, print a text the model writes from an end-of-text token, and record it in metrics.jsonl "
       "(0 = never)",
       {}, 0, 1e12},
      {"sample_tokens", &C::sample_tokens, "optim", "gpt: the tokens of each --sample_every text", {}, 1, 1 << 20},
      {"until", &C::until, "optim",
       "stop when an evaluation reaches METRIC=VALUE, e.g. test_accuracy=0.92 or test_loss=0.3"},

      {"device", &C::device, "speed", "auto | cpu | cuda | cuda:N"},
      {"use_amp", &C::use_amp, "speed", "automatic mixed precision"},
      {"amp_dtype",
       &C::amp_dtype,
       "speed",
       "autocast dtype (auto: bf16 where supported, else fp16)",
       {"auto", "fp16", "bf16"}},
      {"amp_check", &C::amp_check, "speed",
       "before training, compare a few mixed-precision and fp32 steps on one batch; fall back fp16 -> bf16 -> fp32 "
       "when they disagree"},
      {"cudnn_benchmark", &C::cudnn_benchmark, "speed", "let cuDNN time and pick the fastest kernels"},
      {"cudnn_deterministic", &C::cudnn_deterministic, "speed", "deterministic cuDNN kernels"},
      {"tf32", &C::tf32, "speed", "TF32 matmuls and convolutions (Ampere+)"},
      {"channels_last", &C::channels_last, "speed", "NHWC memory format for images"},
      {"fused_optimizer",
       &C::fused_optimizer,
       "speed",
       "optimizer update in one fused kernel over all tensors (auto: where the device has one)",
       {"auto", "on", "off"}},
      {"cuda_graphs", &C::cuda_graphs, "speed",
       "capture the whole training step as one CUDA graph and replay it (CUDA; needs the fused optimizer)"},
      {"attention_precision",
       &C::attention_precision,
       "speed",
       "gpt and llama attention on CPUs under bf16 autocast: amp (ATen's bf16 kernel), fp32 (its fp32 kernel, inputs "
       "widened), auto: whichever a forward and backward at the run's shape takes less time in, timed at start",
       {"auto", "amp", "fp32"}},
      {"threads", &C::threads, "speed", "intra-op CPU threads (0 = torch's default)", {}, 0, 4096},
      {"seed", &C::seed, "speed", "random seed for weights, shuffling and augmentation", {}, 0, 9.2e18},

      {"output_dir", &C::output_dir, "output", "run folder (default runs/<date-time>-<preset>)"},
      {"log_every", &C::log_every, "output", "optimizer steps between log lines", {}, 1, 1e12},
      {"save_checkpoints", &C::save_checkpoints, "output", "write a checkpoint every epoch"},
      {"tensorboard", &C::tensorboard, "output", "also write TensorBoard event files to <output_dir>/tensorboard"},
      {"export", &C::export_path, "output", "write the final weights here as safetensors (e.g. model.safetensors)"},
      {"resume", &C::resume, "output",
       "continue a run: auto (the newest intact checkpoint in <output_dir>) or a checkpoint path"},
      {"allow_data_change", &C::allow_data_change, "output",
       "resume even though the training data's sample count changed (the position is kept in samples)"},
      {"keep_checkpoints", &C::keep_checkpoints, "output", "epoch checkpoints kept (last and best always)", {}, 1, 1e6},
      {"time_limit", &C::time_limit, "output", "stop cleanly with a checkpoint before this much time, e.g. 8h45m"},
      {"profile", &C::profile, "output",
       "START:STOP[:shapes]: record steps START+1 to STOP with the Kineto profiler into the run's profile/ folder "
       "(trace.json for Perfetto, ops.csv by self time, memory.csv; memory.pickle on a GPU), e.g. 10:15; :shapes "
       "splits ops.csv by input shapes"},
      {"max_bad_steps",
       &C::max_bad_steps,
       "output",
       "consecutive non-finite losses before stopping (exit 3)",
       {},
       1,
       1e9},
      {"monitor_interval",
       &C::monitor_interval,
       "output",
       "seconds between monitor.csv samples (0 = off)",
       {},
       0,
       3600},
      {"dist_timeout",
       &C::dist_timeout,
       "parallel",
       "seconds a rank waits for the others (joining, each collective) before it fails naming them",
       {},
       1,
       86400},
      {"ddp_bucket_mb",
       &C::ddp_bucket_mb,
       "parallel",
       "gradients all-reduced in buckets of this many MiB, each as soon as backward fills it (0: one after backward)",
       {},
       0,
       1e6},
      {"balance",
       &C::balance,
       "parallel",
       "auto: time each rank's step before training and give faster ranks bigger batches (the update still "
       "equals one batch of the same global size)",
       {"off", "auto"}},
      {"rank_batch_sizes",
       &C::rank_batch_sizes,
       "parallel",
       "each rank's batch size, e.g. 96,64 for unequal GPUs (the update still equals one batch of their sum)"},
      {"sync_bn",
       &C::sync_bn,
       "parallel",
       "BatchNorm normalizes with the whole global batch's statistics (all-reduced in forward and backward); off: each "
       "rank's own, as DDP"},
      {"shard",
       &C::shard,
       "parallel",
       "sharded data parallel (ZeRO): optimizer = each rank keeps the optimizer state of 1/N of the parameters "
       "(gradients reduce-scattered, updated slices all-gathered); gradients = also frees full gradients as soon as "
       "they are reduced, every micro-batch; none = every rank keeps everything (DDP)",
       {"none", "optimizer", "gradients"}},
      {"pipeline_stages",
       &C::pipeline_stages,
       "parallel",
       "split the model into this many consecutive stages, each on its own device (GPUs cuda:0.., or a thread each "
       "on a CPU), with micro-batches flowing through them",
       {},
       1,
       64},
      {"micro_batches",
       &C::micro_batches,
       "parallel",
       "micro-batches each batch is cut into for the pipeline stages (auto: 4 per stage)",
       {},
       1,
       1 << 20,
       true},
      {"pipeline_schedule",
       &C::pipeline_schedule,
       "parallel",
       "gpipe: all forwards, then all backwards; 1f1b: one forward, one backward (at most as many micro-batches' "
       "activations alive as stages)",
       {"gpipe", "1f1b"}},
      {"stage_balance",
       &C::stage_balance,
       "parallel",
       "where the stages are cut, making the largest stage as small as possible: params = by parameter counts, time = by "
       "a short profile of each piece's forward and backward",
       {"params", "time"}},
      {"deterministic", &C::deterministic, "speed", "deterministic algorithms (bit-identical resume)"},
  };
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

std::string Field::type_name() const {
  return std::visit(
      [](auto m) -> std::string {
        using T = std::remove_reference_t<decltype(std::declval<Config>().*m)>;
        if constexpr (std::is_same_v<T, bool>)
          return "bool";
        else if constexpr (std::is_same_v<T, int64_t>)
          return "int";
        else if constexpr (std::is_same_v<T, double>)
          return "float";
        else
          return "string";
      },
      member);
}

nlohmann::json Field::get(const Config& c) const {
  if (takes_auto && c.*std::get<int64_t Config::*>(member) == kAuto) return "auto";
  return std::visit([&](auto m) { return nlohmann::json(c.*m); }, member);
}

namespace {
std::vector<Field>& field_table() {
  static std::vector<Field> fields = make_fields();
  return fields;
}
}  // namespace

const std::vector<Field>& config_fields() { return field_table(); }

nlohmann::json to_json(const Config& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : config_fields()) j[f.name] = f.get(c);
  return j;
}

void set_model_choices(std::vector<std::string> names) {
  for (auto& f : field_table())
    if (f.name == "model") f.choices = std::move(names);
}

bool is_model_file(std::string_view model) {
  auto ends = [&](std::string_view suffix) {
    return model.size() > suffix.size() && model.substr(model.size() - suffix.size()) == suffix;
  };
  return ends(".pt2") || ends(".pt");
}

bool is_script_file(std::string_view model) { return model.size() > 3 && model.substr(model.size() - 3) == ".pt"; }

std::vector<std::string> config_field_names() {
  std::vector<std::string> names;
  for (const auto& f : config_fields()) names.push_back(f.name);
  return names;
}

std::string normalize_flag_name(std::string_view name) {
  std::string n(name);
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  // Other trainers' spellings of the same field (named in the field's help).
  if (n == "initial_checkpoint") return "init_from";  // timm's
  return n;
}

const Field* find_field(std::string_view name) {
  std::string n = normalize_flag_name(name);
  for (const auto& f : config_fields())
    if (f.name == n) return &f;
  return nullptr;
}

void set_field_json(Config& c, const Field& f, const nlohmann::json& v, const std::string& where,
                    std::vector<std::string>& problems) {
  auto wrong = [&](const std::string& expected) {
    problems.push_back(where + ": key '" + f.name + "' has value " + v.dump() + " (expected " + expected + ")");
  };
  std::visit(
      [&](auto m) {
        using T = std::remove_reference_t<decltype(c.*m)>;
        if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) return wrong("true or false");
          c.*m = v.get<bool>();
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (f.takes_auto && v == "auto") {
            c.*m = kAuto;
            return;
          }
          if (!v.is_number_integer()) return wrong(f.takes_auto ? "an integer or \"auto\"" : "an integer");
          c.*m = v.get<int64_t>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!v.is_number()) return wrong("a number");
          c.*m = v.get<double>();
        } else {
          if (!v.is_string()) return wrong("a string");
          c.*m = v.get<std::string>();
        }
      },
      f.member);
}

void set_field_flag(Config& c, const Field& f, const std::optional<std::string>& value, bool negated,
                    std::vector<std::string>& problems) {
  const std::string flag = "--" + f.name;
  auto wrong = [&](const std::string& expected) {
    problems.push_back("flag " + flag + " has value " + quoted(value.value_or("")) + " (expected " + expected + ")");
  };
  if (negated && !f.is_bool()) {
    problems.push_back("flag --no-" + f.name + " is not valid (" + flag + " takes a " + f.type_name() + " value)");
    return;
  }
  if (!value && !f.is_bool()) {
    problems.push_back("flag " + flag + " needs a value (" + f.type_name() + ")");
    return;
  }
  std::visit(
      [&](auto m) {
        using T = std::remove_reference_t<decltype(c.*m)>;
        if constexpr (std::is_same_v<T, bool>) {
          bool b = true;
          if (value) {
            const std::string& s = *value;
            if (s == "true" || s == "1" || s == "yes" || s == "on")
              b = true;
            else if (s == "false" || s == "0" || s == "no" || s == "off")
              b = false;
            else
              return wrong("true or false");
          }
          c.*m = negated ? !b : b;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          const std::string& s = *value;
          if (f.takes_auto && s == "auto") {
            c.*m = kAuto;
            return;
          }
          const auto x = parse_integer(s);
          if (!x) return wrong(f.takes_auto ? "an integer or auto" : "an integer");
          c.*m = *x;
        } else if constexpr (std::is_same_v<T, double>) {
          const std::string& s = *value;
          char* end = nullptr;
          double x = std::strtod(s.c_str(), &end);
          if (s.empty() || *end != '\0' || !std::isfinite(x)) return wrong("a number");
          c.*m = x;
        } else {
          c.*m = *value;
        }
      },
      f.member);
}

void apply_json(Config& c, const nlohmann::json& object, const std::string& where, std::vector<std::string>& problems,
                const std::vector<std::string>& skip) {
  if (!object.is_object()) {
    problems.push_back(where + ": expected a JSON object of settings, got " + std::string(object.type_name()));
    return;
  }
  for (const auto& [key, value] : object.items()) {
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    const Field* f = find_field(key);
    if (!f || f->name != key) {  // JSON keys are exact snake_case
      // A key is quoted whole up to 64 characters: a 10 MB one must not become a 10 MB message.
      const std::string shown = key.size() > 64 ? key.substr(0, 64) + "..." : key;
      problems.push_back(where + ": unknown key '" + shown + "'" +
                         did_you_mean(normalize_flag_name(key), config_field_names()));
      continue;
    }
    if (f->group == "source") {
      problems.push_back(where + ": key '" + key + "' only works as a command-line flag");
      continue;
    }
    // Trust in a program's code is given by whoever runs gputrain: a preset or a --config file
    // cannot give it (a checkpoint's record of it is skipped by its reader).
    if (key == "trust_program" && value != false) {
      problems.push_back(where + ": key 'trust_program' only works as a command-line flag (a file cannot vouch for a "
                                 "program)");
      continue;
    }
    set_field_json(c, *f, value, where, problems);
  }
}

}  // namespace gputrain
