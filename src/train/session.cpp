// The Session: one run's pieces, built once, in one order, for every command.
#include "train/session.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <stdexcept>

#include "core/device_cuda.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/text.h"
#include "train/amp_check.h"
#include "train/auto_batch.h"
#include "train/auto_workers.h"
#include "train/balance.h"
#include "train/keep_state.h"
#include "train/optim.h"
#include "train/resolve_recipe.h"
#include "train/autocast.h"

namespace gputrain {
namespace {

// What "best" means for this task, and the task options that cannot apply to it.
std::string check_task_options(const Config& c, const Dataset& train) {
  const bool regression = train.is_regression();
  const std::string metric = c.monitor_metric == "auto" ? (regression ? "loss" : "accuracy") : c.monitor_metric;
  std::vector<std::string> problems;
  if (regression && (metric == "accuracy" || metric == "top5"))
    problems.push_back(fmt::format(
        "monitor_metric '{}' is for classification; this data is regression (use loss, mae or rmse)", metric));
  if (!regression && (metric == "mae" || metric == "rmse"))
    problems.push_back(fmt::format(
        "monitor_metric '{}' is for regression; this data is classification (use loss or accuracy)", metric));
  if (!regression && metric == "top5" && train.num_classes() < 5)
    problems.push_back(
        fmt::format("monitor_metric 'top5' needs 5 classes or more; this data has {}", train.num_classes()));
  if (!regression && c.loss != "auto")
    problems.push_back(fmt::format("--loss {} is for regression; classification trains with cross-entropy", c.loss));
  if (regression && c.num_classes > 0)
    problems.push_back(fmt::format("--num_classes {} is for classification; this data is regression", c.num_classes));
  if (regression && c.label_smoothing > 0)
    problems.push_back("--label_smoothing is for classification; this data is regression");
  if (!problems.empty()) throw Error(problems, "see --task to change how the targets are read", kExitUsage);
  return metric;
}

// --rank_batch_sizes "96,64": one positive size per rank (empty when not given).
std::vector<int64_t> parse_rank_batch_sizes(const std::string& sizes, int world) {
  std::vector<int64_t> out;
  if (sizes.empty()) return out;
  for (const auto& item : split_list(sizes, ListItems::kTrimmed)) {
    const auto b = parse_integer(item);
    if (!b || *b < 1)
      throw usage_error(fmt::format("--rank_batch_sizes '{}': '{}' is not a batch size of 1 or more", sizes, item),
                        "one positive integer per rank, e.g. --rank_batch_sizes 96,64");
    out.push_back(*b);
  }
  if (static_cast<int>(out.size()) != world)
    throw usage_error(fmt::format("--rank_batch_sizes '{}' names {} ranks; this job has {}", sizes, out.size(), world),
                      "one size per rank (gputrain launch --nproc_per_node N, torchrun or srun start the ranks)");
  return out;
}

std::unique_ptr<Trainer> build_trainer(const Config& c, const Recipe& recipe, const Dataset& train) {
  // Regression models output one value per target.
  const int64_t outputs = train.is_regression() ? train.target_numel() : train.num_classes();
  NetPtr model = make_model(c.model, model_spec(c, train.sample_shape(), outputs));
  model->to(recipe.device);
  if (recipe.channels_last) to_channels_last(*model);
  auto optimizer = make_optimizer(c, *model, recipe.fused_optimizer);  // after the moves: it must hold the final tensors
  return std::make_unique<Trainer>(
      model, std::move(optimizer), recipe,
      TrainerOptions{c.accumulation_steps, c.clip_max_norm, {c.loss, c.label_smoothing, c.huber_delta}, c.ema_decay});
}

}  // namespace

Session::Session(const Config& requested, SessionOptions options) : rc_(requested), options_(std::move(options)) {
  pin(options_.pinned);
  auto problems = model_option_problems(rc_.resolved);  // before any data is read
  if (!problems.empty()) throw Error(problems, "drop the options the model does not use", kExitUsage);

  rank_batch_sizes_ = parse_rank_batch_sizes(rc_.resolved.rank_batch_sizes, options_.ranks.world_size);
  machine_ = probe_machine(rc_.resolved.device != "cpu");
  if (options_.ranks.world_size > 1)
    join_ranks();
  else if (rc_.resolved.sync_bn)
    rc_.decide("sync_bn", false, "one process: its batch is the global batch");
  if (rc_.resolved.pipeline_stages > 1 || rc_.resolved.micro_batches != kAuto) plan_stages();
  recipe_ = resolve_recipe(rc_, machine_);
  apply_global_switches(recipe_);
  if (options_.ranks.world_size > 1) {
    if (!options_.comm) throw std::logic_error("Session: several ranks and no Comm");
    comm_ = options_.comm;
    comm_->connect(recipe_.cuda ? recipe_.device.index() : -1);
    const double mb = rc_.resolved.ddp_bucket_mb;
    recipe_.report.push_back(
        {"data parallel", fmt::format("{} ranks over {} ({}); gradients all-reduced {}", options_.ranks.world_size,
                                      recipe_.cuda ? "NCCL" : "Gloo", options_.ranks.describe(),
                                      mb > 0 ? fmt::format("in {:g} MiB buckets during backward", mb)
                                             : std::string("in one bucket after backward (--ddp_bucket_mb 0)"))});
  }

  data_ = options_.data ? options_.data : std::make_shared<const DataSplits>(make_datasets(rc_.resolved));
  resolve_from_data();

  if (recipe_.cuda) cuda_reset_peak(recipe_.device.index());  // the run's peak memory is its own
  trainer_ = build_trainer(rc_.resolved, recipe_, *data_->train);
  if (rc_.resolved.pipeline_stages > 1) make_stages();
  if (comm_) {
    // Every rank starts from rank 0's weights and buffers (the same seed makes them equal
    // already; a resume loads them on every rank; this makes it certain).
    std::vector<torch::Tensor> state;
    for (const auto& p : trainer_->model().parameters()) state.push_back(p.detach());
    for (const auto& b : trainer_->model().buffers()) state.push_back(b);
    comm_->broadcast(state, 0);
    // Then each rank its own random stream (dropout masks), rank 0 the one-process one; a
    // resume puts back each rank's saved state.
    if (options_.ranks.rank > 0)
      torch::manual_seed(mix_seed(static_cast<uint64_t>(rc_.resolved.seed), 0x7a4bu, static_cast<uint64_t>(options_.ranks.rank)));
    if (rc_.resolved.balance == "auto") balance_ranks();
    const int norms =
        trainer_->set_comm(comm_.get(), static_cast<double>(rc_.resolved.batch_size) / static_cast<double>(global_batch_size()),
                           rc_.resolved.ddp_bucket_mb, rc_.resolved.sync_bn);
    if (rc_.resolved.sync_bn)
      recipe_.report.push_back({"sync_bn", norms > 0 ? fmt::format("{} BatchNorm layers use the global batch's statistics", norms)
                                                     : fmt::format("no BatchNorm layer in {}: nothing to synchronize", rc_.resolved.model)});
  }
  check_precision();  // before the batch-size search, which must search in the final precision
  search_batch_size();
  choose_num_workers();
}

void Session::join_ranks() {
  const RankEnv& e = options_.ranks;
  Config c = rc_.resolved;
  const std::string why = fmt::format("rank {} of {}", e.rank, e.world_size);
  if (!c.rank_batch_sizes.empty())
    rc_.decide("batch_size", rank_batch_sizes_[static_cast<size_t>(e.rank)],
               fmt::format("rank {}'s of --rank_batch_sizes {}", e.rank, c.rank_batch_sizes));
  // A rank takes its local rank's GPU; with CUDA_VISIBLE_DEVICES narrowed per task (Slurm's
  // --gpus-per-task), the one it sees.
  const int gpus = static_cast<int>(machine_.gpus.size());
  if ((c.device == "auto" || c.device == "cuda") && gpus > 0) {
    const int index = gpus == 1 ? 0 : e.local_rank % gpus;
    rc_.decide("device", fmt::format("cuda:{}", index),
               fmt::format("local rank {} of {} on {} visible GPU{}", e.local_rank, e.local_world_size, gpus, gpus == 1 ? "" : "s"));
  }
  if (c.cuda_graphs) rc_.decide("cuda_graphs", false, why + ": not with data parallel yet");
  if (c.auto_batch_size) rc_.decide("auto_batch_size", false, why + ": each rank would search alone");
}

void Session::plan_stages() {
  const Config c = rc_.resolved;
  const int64_t n = c.pipeline_stages;
  if (n == 1) {
    if (c.micro_batches != 1)
      throw usage_error(fmt::format("--micro_batches {} needs --pipeline_stages 2 or more", c.micro_batches),
                        "on one device, --accumulation_steps cuts a step into micro-batches");
    return;
  }
  if (options_.ranks.world_size > 1)
    throw usage_error(fmt::format("--pipeline_stages {} with {} data-parallel ranks: stages and ranks do not combine yet", n,
                                  options_.ranks.world_size),
                      "run the stages in one process, or the ranks without --pipeline_stages");
  const int64_t micro = c.micro_batches == kAuto ? 4 * n : c.micro_batches;
  if (micro > c.batch_size)
    rc_.decide("micro_batches", c.batch_size, fmt::format("a batch of {} samples holds no more", c.batch_size));
  else if (c.micro_batches == kAuto)
    rc_.decide("micro_batches", micro, "auto: 4 per stage");
  const std::string why = "not with pipeline stages";
  if (c.cuda_graphs) rc_.decide("cuda_graphs", false, why + " (yet)");
  if (c.auto_batch_size) rc_.decide("auto_batch_size", false, why + ": each stage's device has its own memory");
}

void Session::make_stages() {
  const Config& c = rc_.resolved;
  Net& net = trainer_->model();
  const auto devices = stage_devices();
  std::vector<double> costs;  // empty: by parameter count
  std::string measured;
  if (c.stage_balance == "time" && !net.pieces().empty()) {
    // Each piece's forward and backward on one micro-batch of training data, on this device, in
    // the run's precision; the generators and batch-norm statistics are put back.
    LoaderOptions o = eval_loader_options(std::max<int64_t>(1, c.batch_size / c.micro_batches));
    o.num_workers = 0;
    Loader loader(data_->train, o);
    loader.start_epoch(0);
    const auto batch = loader.next();
    if (!batch) throw runtime_error("--stage_balance time: no training batch to time");
    KeepRng keep_rng(recipe_.device);
    TensorSnapshot buffers(net, /*with_parameters=*/false);
    net.train();
    {
      AutocastGuard autocast(recipe_.amp, recipe_.device.type(), recipe_.amp_dtype);
      costs = piece_seconds(net, batch->x);
    }
    buffers.restore();
    trainer_->optimizer().zero_grad(/*set_to_none=*/true);
    std::vector<std::string> ms;
    for (double s : costs) ms.push_back(fmt::format("{:.2f}", 1000 * s));
    measured = fmt::format("; cut by measured piece times (ms: {})", join(ms, " "));
  }
  PipelineOptions o;
  o.stages = split_model(net, c.model, devices, costs);
  o.micro_batches = c.micro_batches;
  o.schedule = c.pipeline_schedule == "gpipe" ? PipelineSchedule::kGpipe : PipelineSchedule::k1f1b;
  o.threads_per_stage = std::max(1, at::get_num_threads() / static_cast<int>(o.stages.size()));
  o.amp = recipe_.amp;
  o.amp_dtype = recipe_.amp_dtype;
  trainer_->set_pipeline(std::make_unique<Pipeline>(net, o));
  recipe_.report.push_back(
      {"pipeline", fmt::format("{} stages x {} micro-batches, {}: {}; {} intra-op thread{} per stage{}", o.stages.size(),
                               o.micro_batches, c.pipeline_schedule, describe_stages(net, o.stages), o.threads_per_stage,
                               o.threads_per_stage == 1 ? "" : "s", measured)});
}

std::vector<torch::Device> Session::stage_devices() const {
  const int64_t n = rc_.resolved.pipeline_stages;
  if (n == 1) return {};
  const Config& c = rc_.resolved;
  if (!recipe_.cuda) {
    // The CPU stages share one random generator: a recomputed block's dropout mask could be drawn
    // after another stage's draws and differ from the forward's.
    if (c.grad_checkpointing && c.dropout > 0)
      throw usage_error(fmt::format("--grad_checkpointing with --dropout {} and pipeline stages on a CPU", c.dropout),
                        "the stage threads share one random generator: drop one of the two, or run the stages on GPUs");
    return std::vector<torch::Device>(static_cast<size_t>(n), torch::kCPU);  // a thread each
  }
  const int64_t first = recipe_.device.index(), gpus = static_cast<int64_t>(machine_.gpus.size());
  if (first + n > gpus)
    throw usage_error(fmt::format("--pipeline_stages {} from cuda:{} needs {} GPUs; this machine has {}", n, first, first + n, gpus),
                      "use fewer stages, or --device cpu (each stage a thread)");
  std::vector<torch::Device> devices;
  for (int64_t s = 0; s < n; ++s) devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(first + s));
  return devices;
}

void Session::balance_ranks() {
  const Config c = rc_.resolved;
  const int world = options_.ranks.world_size, rank = options_.ranks.rank;
  if (!c.rank_batch_sizes.empty())
    throw usage_error("--balance auto and --rank_batch_sizes both set", "give the sizes, or let --balance auto find them");
  // Each rank times forward and backward on --batch_size samples of the training data (the
  // first warm-up step left out); the generators and batch-norm statistics are put back. On a
  // GPU the step's peak memory per sample, against what the device has left, says how many
  // samples fit.
  LoaderOptions o = eval_loader_options(c.batch_size);
  o.num_workers = 0;
  Loader loader(data_->train, o);
  loader.start_epoch(0);
  const auto batch = loader.next();
  if (!batch) throw runtime_error("--balance auto: no training batch to time");
  const int dev = recipe_.cuda ? recipe_.device.index() : -1;
  int64_t base = 0;
  if (dev >= 0) {
    cuda_synchronize(dev);
    cuda_reset_peak(dev);
    base = cuda_peak_allocated(dev);  // what the model and optimizer hold before the step
  }
  double seconds = 0, capacity = 0;
  {
    KeepRng keep_rng(recipe_.device);
    TensorSnapshot buffers(trainer_->model(), /*with_parameters=*/false);
    constexpr int kSteps = 5;
    for (int i = 0; i <= kSteps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      trainer_->probe(*batch);  // syncs with a GPU
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (faults().slow_rank == rank) {
        std::this_thread::sleep_for(std::chrono::duration<double>(took));
        took *= 2;
      }
      if (i > 0) seconds += took / kSteps;
    }
    buffers.restore();
  }
  if (dev >= 0) {
    const double per_sample = static_cast<double>(cuda_peak_allocated(dev) - base) / static_cast<double>(c.batch_size);
    const double room = static_cast<double>(cuda_free_bytes(dev) + cuda_peak_reserved(dev) - base);
    if (per_sample > 0) capacity = std::max(1.0, 0.9 * room / per_sample);
  }
  // Every rank's time and capacity, then sizes proportional to speed, within memory, that add
  // up to the global batch.
  auto all = torch::zeros({2 * world}, torch::TensorOptions().dtype(torch::kDouble).device(recipe_.device));
  all[2 * rank] = seconds;
  all[2 * rank + 1] = capacity;
  comm_->all_reduce_sum(all)->wait();
  all = all.cpu();
  std::vector<double> times, capacities;
  for (int r = 0; r < world; ++r) {
    times.push_back(all[2 * r].item<double>());
    capacities.push_back(all[2 * r + 1].item<double>());
  }
  const std::vector<int64_t> sizes = split_by_speed(times, capacities, c.batch_size * world);
  std::vector<std::string> texts, ms, fit;
  for (int r = 0; r < world; ++r) {
    texts.push_back(std::to_string(sizes[static_cast<size_t>(r)]));
    ms.push_back(fmt::format("{:.1f}", 1000 * times[static_cast<size_t>(r)]));
    fit.push_back(capacities[static_cast<size_t>(r)] > 0 ? fmt::format("{:.0f}", capacities[static_cast<size_t>(r)]) : "-");
  }
  rank_batch_sizes_ = sizes;
  std::string why = fmt::format("balance auto: step times {} ms per {} samples", join(ms, ", "), c.batch_size);
  if (dev >= 0) why += fmt::format("; samples that fit in memory {}", join(fit, ", "));
  rc_.decide("rank_batch_sizes", join(texts, ","), why);
  rc_.decide("batch_size", sizes[static_cast<size_t>(rank)], fmt::format("rank {}'s of {}", rank, join(texts, ",")));
  recipe_.report.push_back({"balance", fmt::format("rank batch sizes {} ({})", join(texts, ","), why)});
}

void Session::check_precision() {
  if (!recipe_.amp) return;
  if (!options_.amp_fallback.empty() && recipe_.grad_scaler)
    fall_back_amp(options_.amp_fallback + " (earlier in this run)");
  if (!recipe_.amp || !options_.check_amp || !rc_.resolved.amp_check) return;
  LoaderOptions first = eval_loader_options(rc_.resolved.batch_size);
  first.num_workers = 0;
  first.rank = 0;  // every rank checks the same batch, and so decides the same
  first.world_size = 1;
  Loader loader(data_->train, first);
  loader.start_epoch(0);
  const auto batch = loader.next();
  while (recipe_.amp && batch) {
    const AmpCheckResult r = check_amp(*trainer_, *batch, recipe_.amp_dtype, recipe_.grad_scaler, {.lr = rc_.resolved.lr});
    if (!r.ok) {
      fall_back_amp("the AMP check: " + r.summary);
      continue;
    }
    auto amp_row = std::find_if(recipe_.report.begin(), recipe_.report.end(), [](const auto& row) { return row.first == "AMP"; });
    recipe_.report.insert(amp_row == recipe_.report.end() ? amp_row : amp_row + 1, {"AMP check", r.summary});
    break;
  }
}

std::string Session::fall_back_amp(const std::string& why) {
  const std::string to = fall_back_precision(rc_, recipe_, machine_, why);
  trainer_->set_precision(recipe_);
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
  const std::string task = train.is_regression() ? "regression" : "classification";
  if (c.task == "auto") rc_.decide("task", task, "from the training targets");
  if (!train.is_regression() && c.num_classes != train.num_classes())
    rc_.decide("num_classes", train.num_classes(), c.dataset == "synthetic" ? "synthetic default" : "classes in the training data");
  const std::string metric = check_task_options(c, train);
  if (c.monitor_metric == "auto")
    rc_.decide("monitor_metric", metric, train.is_regression() ? "regression: the loss" : "classification");
  if (c.loss == "auto")
    rc_.decide("loss", train.is_regression() ? "mse" : "cross_entropy",
               train.is_regression() ? "regression targets" : "class labels");
  const auto shape = train.sample_shape();
  if (c.model.rfind("resnet", 0) == 0 && c.stem == "auto" && shape.size() == 3) {
    const bool small = shape[1] <= 64 && shape[2] <= 64;
    rc_.decide("stem", small ? "small" : "imagenet",
               fmt::format("{}x{} images ({} 64 px)", shape[1], shape[2], small ? "up to" : "over"));
  }
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
  auto found = find_batch_size(*trainer_, train.sample_shape(), train.num_classes(), train.target_numel(), c.batch_size,
                               train.size() / c.accumulation_steps);
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
  o.rank = options_.ranks.rank;
  o.world_size = options_.ranks.world_size;
  o.rank_batch_sizes = rank_batch_sizes_;
  return o;
}

std::vector<int> Session::node_gpus() const {
  if (!recipe_.cuda) return {};
  const RankEnv& e = options_.ranks;
  if (e.world_size == 1) return {recipe_.device.index()};
  // As join_ranks places them: local rank r on visible GPU r mod the GPU count.
  std::vector<int> gpus;
  const int visible = std::max<int>(1, static_cast<int>(machine_.gpus.size()));
  for (int r = 0; r < std::min(e.local_world_size, visible); ++r) gpus.push_back(r % visible);
  return gpus;
}

int64_t Session::global_batch_size() const {
  int64_t sum = 0;
  for (int64_t b : rank_batch_sizes_) sum += b;
  return rank_batch_sizes_.empty() ? rc_.resolved.batch_size * options_.ranks.world_size : sum;
}

LoaderOptions Session::eval_loader_options(int64_t batch_size, bool sharded) const {
  LoaderOptions o = train_loader_options();
  o.batch_size = batch_size;
  o.shuffle = o.drop_last = false;
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
                     row("AMP"), row("channels_last"), data_->description, rc_.resolved.model,
                     parameter_count(trainer_->model()));
}

}  // namespace gputrain
