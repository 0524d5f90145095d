// The training configuration: one plain struct, merged from defaults < preset < --config < flags.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gputrain {

// An int setting left for the run to decide ("auto" in flags and JSON), e.g. --num_workers.
inline constexpr int64_t kAuto = -1;

struct Config {
  // Where the configuration came from (applied first, in this order).
  std::string preset = "quickstart";  // a name in presets/ or a path to a .json file
  std::string config;                 // an optional JSON file applied after the preset
  std::string device_preset = "auto";  // the device recipe under the preset: auto, none or a name
  std::string device_preset_why;       // why auto chose it (not a flag; printed in the device report)

  // Data
  std::string dataset = "fashion-mnist";  // see kDatasets in fields.cpp
  std::string data_dir;                   // empty = the dataset's standard folder (/usr/share/datasets/<name>)
  std::string train_file;                 // csv / npy: the training file (.csv, .npy or .npz)
  std::string test_file;                  // csv / npy: an optional test file
  std::string train_targets;              // npy: the .npy of training targets when train_file is a .npy
  std::string test_targets;               // npy: the .npy of test targets
  std::string target;                     // csv: target column(s), comma-separated; jsonl: the target field
  std::string features;                   // csv: feature columns, comma-separated; empty = all others
  std::string task = "auto";              // auto | classification | multilabel | regression
  int64_t window = 0;                     // csv: rows per sliding window over a time series; 0 = tabular
  int64_t stride = 1;                     // csv: rows between window starts
  int64_t horizon = 1;                    // csv: predict the target this many rows after a window
  int64_t seq_len = 0;                    // tokens: tokens per sample (the model's context); 0 = unset
  int64_t vocab_size = 0;                 // tokens: the vocabulary; 0 = from the tokenizer
  std::string tokenizer;                  // tokens: its tokenizer.json; empty = one beside the train shards;
                                          // text: the SentencePiece .model (or its folder) for a table
  std::string text_column;                // text (a table): the text column, or two for pairs
  std::string label_column;               // text (a table): the label column, or several 0/1 ones (multi-label)
  int64_t max_length = 512;               // text (a table): tokens per text, cut beyond (BERT's positions)
  int64_t eval_tokens = 0;                // tokens: evaluate on the first this many val tokens; 0 = all
  std::string image_size;                 // HxW or N: image_folder decode size, or a resize of image data
  double crop_pct = 0;                    // eval images: short side to image_size / crop_pct, center crop; 0 = off
  int64_t image_channels = 3;             // image_folder: 3 (RGB) or 1 (grayscale)
  double val_split = 0;                   // fraction of the training data held out for evaluation
  int64_t max_image_pixels = 89'478'485;  // image_folder: larger headers are refused (decompression bombs)
  bool skip_bad_samples = false;          // skip (and count) unreadable images instead of stopping
  bool cache = false;                     // keep decoded samples in memory
  std::string input_shape = "1x28x28";    // synthetic only: any shape, e.g. 3x32x32, 64x8, 20
  int64_t num_classes = 0;                // 0 = from the data (synthetic: 10)
  int64_t synthetic_train_size = 8192;
  int64_t synthetic_test_size = 1024;
  bool normalize = true;
  std::string normalize_mean;  // per-channel means, comma-separated; empty = computed from the data
  std::string normalize_std;   // per-channel stds; empty = computed from the data
  int64_t random_crop = 0;     // padding in pixels for a random crop; 0 = off
  bool random_resized_crop = false;  // train images: torchvision's RandomResizedCrop to the sample size
  std::string rrc_scale = "0.08,1";  // its range of the box's share of the image's area
  std::string rrc_ratio = "3/4,4/3";  // its range of the box's width / height
  bool reduced_decode = true;  // image_folder crops: JPEGs decoded at a reduced DCT scale, only the crop
  int64_t shuffle_buffer = 1000;  // webdataset: samples the shuffled stream draws from
  std::string aa;                // auto-augment policy: rand-m9-n2 (RandAugment) or trivialaugmentwide; "" = off
  double reprob = 0;             // random erasing: chance per training sample (timm's --reprob)
  std::string remode = "pixel";  // random erasing fill: const (0), rand (per channel) or pixel (noise)
  int64_t recount = 1;           // random erasing: boxes per erased sample
  double mixup = 0;              // MixUp's Beta alpha (0 = off)
  double cutmix = 0;             // CutMix's Beta alpha (0 = off)
  double mixup_prob = 1.0;       // chance a batch is mixed
  double mixup_switch_prob = 0.5;  // with both on: chance of CutMix rather than MixUp
  bool hflip = false;
  std::string color_jitter;  // brightness[,contrast[,saturation[,hue]]], e.g. 0.4,0.4,0.4,0.1
  bool log1p = false;        // sign(x) * log(1 + |x|) on inputs (count data)

  // Loader
  int64_t batch_size = 128;
  bool auto_batch_size = false;  // find the largest batch that fits (CUDA) before training
  int64_t eval_batch_size = 512;
  int64_t num_workers = 2;  // kAuto: measured by the Session
  int64_t prefetch_factor = 2;  // kAuto: measured by the Session
  bool persistent_workers = true;
  bool pin_memory = true;
  bool non_blocking = true;
  bool drop_last = true;
  bool shuffle = true;
  int64_t bucket_window = kAuto;  // samples per window sorted by length; 0 = off; kAuto: decided by the Session

  // Model
  std::string model = "cnn";        // see kModels in fields.cpp (`gputrain models` lists them)
  std::string output_name;          // a program returning several outputs: the one trained ("" = its first)
  int64_t width = 0;                // base width; 0 = the model's default
  int64_t depth = 0;                // layers (lstm, gru, transformer) or blocks (cnn3d); 0 = default
  std::string stem = "auto";        // resnets: auto (small for <= 64 pixels) | small | imagenet
  int64_t heads = 0;                // transformer attention heads; 0 = default (4)
  int64_t positions = 0;            // gpt: learned positions; llama: the longest context; 0 = --seq_len
  int64_t kv_heads = 0;             // llama: key/value heads (grouped-query attention); 0 = --heads
  int64_t mlp_width = 0;            // llama: the MLP's inner width; 0 = Llama's rule from --width
  double rope_theta = 0;            // llama: the rotary positions' base; 0 = 10000
  std::string rope_scaling;         // llama: Llama 3's "factor,low_freq_factor,high_freq_factor,original_positions"
  double norm_eps = 0;              // llama: RMSNorm's epsilon; 0 = 1e-5
  bool tie_embeddings = false;      // llama: the head is the token embedding (gpt's always is)
  double dropout = 0.0;             // transformer layers, between lstm/gru layers
  bool grad_checkpointing = false;  // recompute residual blocks / encoder layers in backward
  bool fused_head_loss = true;      // a language model's head computed with its loss, in chunks
  bool trust_program = false;       // load a TorchScript --model net.pt, whose code runs on load (command line only)

  // Starting from trained weights, and fine-tuning them
  std::string init_from;         // weights file the model starts from ("" = random weights)
  bool init_ema = false;         // a checkpoint's moving average instead of its raw weights
  bool init_strict = true;       // every name but the head's must match
  std::string freeze;            // comma-separated parameter-name prefixes, or "backbone"
  int64_t unfreeze_at_epoch = 0; // the epoch (from 0) at which frozen parameters join; 0 = never
  bool freeze_bn = false;        // BatchNorm layers of frozen parts keep their running statistics
  double layer_decay = 0;        // timm's --layer-decay: lr x decay^(layers after this one); 0 = off
  double backbone_lr_scale = 1;  // lr multiplier of everything but the head
  int64_t lora_rank = 0;         // gpt, llama: LoRA adapters of this rank on the blocks' projections; 0 = off
  double lora_alpha = 0;         // LoRA's scale is alpha / rank; 0 = the rank (decided)

  // Optimization
  std::string optimizer = "adamw";  // sgd | adam | adamw
  double lr = 1e-3;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  std::string lr_schedule = "cosine";  // constant | step | cosine | onecycle
  int64_t warmup_steps = 0;
  int64_t lr_step_size = 1;  // epochs between decays (step schedule)
  double lr_gamma = 0.1;     // decay factor (step schedule)
  double min_lr = 0.0;       // floor of cosine / one-cycle
  int64_t epochs = 3;
  int64_t max_steps = 0;  // stop after this many optimizer steps; 0 = run all epochs
  int64_t accumulation_steps = 1;
  int64_t tokens_per_step = 0;  // tokens: accumulation_steps decided to make a step this many tokens; 0 = not used
  double clip_max_norm = 0.0;  // 0 = no clipping
  double label_smoothing = 0.0;
  std::string loss = "auto";  // auto (cross_entropy, bce or mse) | mse | l1 | huber | bce
  std::string class_weights;  // "" | balanced | w0,w1,...
  double huber_delta = 1.0;
  std::string monitor_metric = "auto";  // what "best" and early stopping watch; auto: accuracy or loss
  int64_t early_stopping = 0;           // stop after this many evaluations without improvement; 0 = off
  int64_t eval_every = 0;               // also evaluate every N steps inside an epoch (0 = at epoch ends only)
  int64_t sample_every = 0;             // gpt: print a sampled text every N steps (0 = never)
  int64_t sample_tokens = 64;           // gpt: the tokens of each sample (llm.c's 64)
  std::string until;                    // "test_accuracy=0.92": stop when an evaluation reaches it ("" = off)
  double ema_decay = 0;                 // > 0: also evaluate and checkpoint an average of the weights
  double skip_spikes = 0;               // > 1: skip a step whose loss exceeds this x the running mean; 0 = off

  // Speed switches
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  bool use_amp = true;
  std::string amp_dtype = "auto";  // auto | fp16 | bf16
  bool amp_check = true;           // compare a few autocast and fp32 steps before training; fall back if they disagree
  bool cudnn_benchmark = true;
  bool cudnn_deterministic = false;
  bool tf32 = true;
  bool channels_last = true;
  std::string fused_optimizer = "auto";  // auto | on | off
  bool cuda_graphs = false;              // capture the step as a CUDA graph and replay it
  std::string attention_precision = "auto";  // auto | amp | fp32: gpt and llama attention on CPUs under bf16
  int64_t threads = 0;  // intra-op CPU threads; 0 = torch's default
  int64_t seed = 42;

  // Output and resilience
  std::string output_dir;         // default: runs/<date-time>-<preset>
  std::string resume;             // "" | auto | path to a checkpoint
  bool allow_data_change = false;  // resume on training data whose sample count changed
  int64_t keep_checkpoints = 3;   // epoch-N.pt files kept (last.pt and best.pt always)
  std::string time_limit;         // e.g. "8h45m": checkpoint and stop cleanly before it
  std::string profile;            // "START:STOP": record steps START+1..STOP with the profiler (monitor/profiler.h)
  int64_t max_bad_steps = 20;     // consecutive non-finite losses before giving up (exit 3)

  // Data parallel (several ranks: gputrain launch, torchrun, srun)
  double dist_timeout = 300;  // seconds a rank waits for the others (joining, a collective) before failing
  double ddp_bucket_mb = 25;  // gradients all-reduced in buckets of this size as backward fills them; 0: after backward
  std::string rank_batch_sizes;  // "96,64": each rank's own batch size (GPUs of different speeds); "" = --batch_size each
  std::string balance = "off";   // auto: rank batch sizes from a short probe of each rank's speed
  bool sync_bn = false;          // BatchNorm statistics of the global batch (all-reduced); else each rank's own
  std::string shard = "none";    // none | optimizer | gradients: ZeRO-1/2, each rank keeps 1/N of that state

  // Pipeline stages (a model split over devices)
  int64_t pipeline_stages = 1;            // consecutive stages of the model, each on its own device (CPU: thread)
  int64_t micro_batches = kAuto;          // micro-batches per batch flowing through the stages; auto: 4 per stage
  std::string pipeline_schedule = "1f1b";  // gpipe | 1f1b
  std::string stage_balance = "params";   // where the cuts go: by parameter counts, or by measured piece times
  bool deterministic = false;     // deterministic algorithms (bit-identical resumes)
  double monitor_interval = 1.0;  // seconds between monitor.csv samples; 0 = off
  int64_t log_every = 50;
  bool save_checkpoints = true;
  bool tensorboard = false;  // also write TensorBoard event files into <output_dir>/tensorboard
  std::string export_path;   // --export: the final weights as safetensors ("" = none)
};

// Its validation (config_problems) is config/validate.h's and its JSON form (to_json)
// config/fields.h's: both walk the field table, which is built over this struct.

}  // namespace gputrain

namespace gputrain {
// Parses "3x32x32" (or "3,32,32"); returns an empty vector when malformed.
std::vector<int64_t> parse_shape(const std::string& text);
// Parses "0.5,0.25" into numbers; returns an empty vector when malformed or empty.
std::vector<double> parse_numbers(const std::string& text);  // "0.4,0.2", "3/4,4/3"
// Image files decoded while loading (image_folder, webdataset): --image_size is their decode size.
bool encoded_images(const std::string& dataset);
// --normalize_mean / --normalize_std: numbers, or "imagenet" for the statistics every
// ImageNet-pretrained torchvision and timm model was trained with.
std::vector<double> normalize_numbers(const std::string& text, bool mean);
// Parses an image size "HxW" or "N" (square); returns {} when malformed.
std::vector<int64_t> parse_image_size(const std::string& text);
// Parses "8h45m", "90m", "30s", "1h", "3600" (seconds); returns -1 when malformed.
double parse_duration(const std::string& text);
}  // namespace gputrain
