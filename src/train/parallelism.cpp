// Parallelism composed around the Session, the step and the fit loop (parallelism.h).
#include "train/parallelism.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "core/autocast.h"
#include "core/device_cuda.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/text.h"
#include "models/batch_norm.h"
#include "parallel/balance.h"
#include "parallel/grad_sync.h"
#include "parallel/pipeline.h"
#include "parallel/sync_batch_norm.h"
#include "train/keep_state.h"
#include "train/job_agreement.h"
#include "train/pipeline_step.h"
#include "train/shard_checkpoint.h"

namespace gputrain {

// Data parallel around the step: the gradients summed over the ranks in buckets launched during
// the step's last backward (--shard gradients: every loader batch's) and waited for before the
// update, so every rank sees the same
// gradients, infs included (all skip the same overflow step); with --sync_bn, the BatchNorm
// layers normalize with the global batch's statistics in the step's forwards and backwards only
// (probes and checks that one rank runs alone keep local statistics).
class DataParallelHooks : public StepHooks {
 public:
  DataParallelHooks(Net& model, Comm& comm, double bucket_mb, bool sync_bn, ShardMode shard)
      : model_(model),
        comm_(comm),
        bucket_mb_(bucket_mb),
        shard_(shard),
        sync_(std::make_unique<GradSync>(model, comm, bucket_mb, shard)),
        sum_([&comm](torch::Tensor& t) { comm.all_reduce_sum(t)->wait(); }),
        global_norm_([this](const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Tensor& mean,
                            torch::Tensor& var, double momentum, double eps) {
          return sync_batch_norm(x, w, b, mean, var, momentum, eps, sum_);
        }) {
    if (sync_bn)
      for (const auto& m : model.modules())
        if (auto* norm = dynamic_cast<SyncableNorm*>(m.get())) norms_.push_back(norm);
  }
  int synced_norms() const { return static_cast<int>(norms_.size()); }
  double take_wait_seconds() { return sync_->take_wait_seconds(); }
  GradSync& sync() { return *sync_; }

  void begin(int64_t step) override {
    step_ = step;
    for (auto* n : norms_) n->sync_with(&global_norm_);
    sync_->begin_step();
  }
  void before_last_backward() override {
    if (shard_ != ShardMode::kGradients) sync_->arm();
  }
  // --shard gradients: the previous backward's buckets are settled before this forward (its
  // synchronized BatchNorm meets the other ranks after them, in the same order on all).
  void before_forward(const Batch&) override {
    if (shard_ == ShardMode::kGradients) sync_->settle();
  }
  // --shard gradients: every loader batch's backward is armed (its gradients are reduced and
  // freed as they come); after an out-of-memory split, its last chunk's alone (the earlier chunks
  // accumulate here), so a rank that split sends what the others send.
  void before_batch_backward() override {
    if (shard_ == ShardMode::kGradients) sync_->arm_micro();
  }
  // Once per step: a retry after an out-of-memory error (this rank alone) counts the same
  // batches, and a second all-reduce would meet the other ranks' gradient buckets instead.
  torch::Tensor step_total(torch::Tensor count) override {
    if (total_step_ == step_) return total_;
    total_ = count.clone();  // summed in place
    comm_.all_reduce_sum(total_)->wait();
    total_step_ = step_;
    return total_;
  }
  void after_backward() override { sync_->finish(); }
  void end() override {
    for (auto* n : norms_) n->sync_with(nullptr);
    launched_ = sync_->disarm();
  }
  // Nothing of the step may have reached the other ranks: with --shard gradients, an
  // out-of-memory error in the step's first loader batch, before its backward.
  bool can_retry() const override { return !launched_; }
  // Only what trains is all-reduced: the buckets are laid out again over the new set (every
  // rank unfreezes at the same step, so their buckets still pair up).
  void trainable_changed() override {
    // The optimizer's pieces view the slices: plan() refuses --unfreeze_at_epoch with --shard.
    if (shard_ != ShardMode::kNone) throw std::logic_error("sharded data parallel: the trainable parameters changed");
    sync_.reset();  // first: its autograd hooks come off before the new ones go on
    sync_ = std::make_unique<GradSync>(model_, comm_, bucket_mb_);
  }

 private:
  Net& model_;
  Comm& comm_;
  double bucket_mb_;
  ShardMode shard_;
  std::unique_ptr<GradSync> sync_;
  SumOverRanks sum_;
  GlobalBatchNorm global_norm_;
  std::vector<SyncableNorm*> norms_;
  bool launched_ = false;  // the last step threw after some buckets had gone to the other ranks
  int64_t step_ = 0, total_step_ = -1;
  torch::Tensor total_;  // step_total's sum for total_step_
};

namespace {

int64_t trainable_elements(Net& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters())
    if (p.requires_grad()) n += p.numel();
  return n;
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

}  // namespace

// plan()'s decisions, each applied to a working copy as it is made (later choices read earlier
// ones) and kept for the Session to record.
struct Parallelism::Planning {
  ResolvedConfig rc;
  Decisions out;
  Config& resolved = rc.resolved;
  void decide(const std::string& field, const nlohmann::json& value, const std::string& reason) {
    rc.decide(field, value, reason);
    out.push_back({field, value, reason});
  }
  void not_applicable(const std::string& field, const std::string& reason) {
    rc.not_applicable(field, reason);
    out.push_back({field, nullptr, reason, true});
  }
};

Parallelism::Parallelism(Mesh mesh) : mesh_(std::move(mesh)) {}
Parallelism::~Parallelism() = default;

Decisions Parallelism::plan(const ResolvedConfig& given, const MachineInfo& machine, int64_t keep_global) {
  Planning rc{given};
  const int world = mesh_.ranks.world_size;
  if (keep_global > 0 && rc.resolved.rank_batch_sizes.empty()) {
    if (keep_global % world != 0)
      throw usage_error(fmt::format("resuming a run whose global batch is {} on {} ranks: {} does not split into {} "
                                    "equal batches", keep_global, world, keep_global, world),
                        fmt::format("resume on a number of ranks that divides {}, give --rank_batch_sizes that add up "
                                    "to {}, or set --batch_size for a new global batch (the schedule then changes)",
                                    keep_global, keep_global));
    if (rc.resolved.batch_size != keep_global / world)
      rc.decide("batch_size", keep_global / world,
                fmt::format("keeps the run's global batch of {} over {} rank{}", keep_global, world, world == 1 ? "" : "s"));
  }
  const RankEnv& e = mesh_.ranks;
  rank_batch_sizes_ = parse_rank_batch_sizes(rc.resolved.rank_batch_sizes, world);
  if (!rank_batch_sizes_.empty())  // first: the stages cut this rank's batch into micro-batches
    rc.decide("batch_size", rank_batch_sizes_[static_cast<size_t>(e.rank)],
              fmt::format("rank {}'s of --rank_batch_sizes {}", e.rank, rc.resolved.rank_batch_sizes));
  const Config c = rc.resolved;
  if (c.pipeline_stages > 1 || c.micro_batches != kAuto) plan_stages(rc);
  if (c.balance == "auto" && !mesh_.data_parallel()) rc.not_applicable("balance", "one process: nothing to balance");
  if (!mesh_.data_parallel()) {
    if (c.sync_bn) rc.decide("sync_bn", false, "one process: its batch is the global batch");
    if (c.shard != "none") rc.decide("shard", "none", "one process: nothing to shard its state over");
    return rc.out;
  }
  if (c.shard != "none") {
    // The optimizer's pieces view slices laid out over the pipeline's or the trainable set's
    // parameters as they were when the slices were cut.
    if (c.pipeline_stages > 1)
      throw usage_error(fmt::format("--shard {} with --pipeline_stages {}: not yet", c.shard, c.pipeline_stages),
                        "shard the state of ranks without stages, or run the stages with --shard none");
    if (c.unfreeze_at_epoch > 0)
      throw usage_error(fmt::format("--shard {} with --unfreeze_at_epoch {}: not yet (the slices are cut over the "
                                    "parameters that train from the start)", c.shard, c.unfreeze_at_epoch),
                        "drop --unfreeze_at_epoch, or train with --shard none");
  }
  const std::string why = fmt::format("rank {} of {}", e.rank, e.world_size);
  // A rank takes its local rank's GPU; with CUDA_VISIBLE_DEVICES narrowed per task (Slurm's
  // --gpus-per-task), the one it sees. With pipeline stages each rank holds as many consecutive
  // GPUs as it has stages, from local rank x stages; every rank checks that they fit alike, so
  // all refuse together rather than one waiting in a collective for another that gave up.
  const int gpus = static_cast<int>(machine.gpus.size());
  const int per_rank = static_cast<int>(std::max<int64_t>(1, c.pipeline_stages));
  if ((c.device == "auto" || c.device == "cuda") && gpus > 0) {
    if (per_rank > 1 && gpus != per_rank && e.local_world_size * per_rank > gpus)
      throw usage_error(fmt::format("{} local ranks x --pipeline_stages {} need {} GPUs; this node has {}", e.local_world_size,
                                    per_rank, e.local_world_size * per_rank, gpus),
                        "use fewer ranks per node or fewer stages, or let each rank see its own GPUs "
                        "(CUDA_VISIBLE_DEVICES, Slurm's --gpus-per-task)");
    const int index = per_rank == 1 ? (gpus == 1 ? 0 : e.local_rank % gpus) : gpus == per_rank ? 0 : e.local_rank * per_rank;
    rc.decide("device", fmt::format("cuda:{}", index),
              fmt::format("local rank {} of {} on {} visible GPU{}{}", e.local_rank, e.local_world_size, gpus,
                          gpus == 1 ? "" : "s", per_rank > 1 ? fmt::format(", {} per rank (its stages)", per_rank) : ""));
  }
  if (c.cuda_graphs) rc.decide("cuda_graphs", false, why + ": not with data parallel yet");
  // Each rank would judge its own share of the loss: the ranks would skip different steps and
  // their weights part.
  if (c.skip_spikes > 0)
    throw usage_error(fmt::format("--skip_spikes {} with data parallel ({} ranks): not yet", c.skip_spikes, e.world_size),
                      "run it in one process, or drop --skip_spikes");
  if (c.auto_batch_size) rc.decide("auto_batch_size", false, why + ": each rank would search alone");
  return rc.out;
}

void Parallelism::plan_stages(Planning& rc) {
  const Config c = rc.resolved;
  const int64_t n = c.pipeline_stages;
  if (n == 1) {
    if (c.micro_batches != 1)
      throw usage_error(fmt::format("--micro_batches {} needs --pipeline_stages 2 or more", c.micro_batches),
                        "on one device, --accumulation_steps cuts a step into micro-batches");
    return;
  }
  // Each stage thread would all-reduce its BatchNorm statistics as its schedule reaches them, in
  // an order that differs between the ranks: the collectives would pair up wrongly.
  if (mesh_.data_parallel() && c.sync_bn)
    throw usage_error(fmt::format("--sync_bn with --pipeline_stages {} on {} ranks", n, mesh_.ranks.world_size),
                      "drop --sync_bn (each rank normalizes with its own batch), or run the ranks without stages");
  const int64_t micro = c.micro_batches == kAuto ? 4 * n : c.micro_batches;
  if (micro > c.batch_size)
    rc.decide("micro_batches", c.batch_size, fmt::format("a batch of {} samples holds no more", c.batch_size));
  else if (c.micro_batches == kAuto)
    rc.decide("micro_batches", micro, "auto: 4 per stage");
  const std::string why = "not with pipeline stages";
  if (c.cuda_graphs) rc.decide("cuda_graphs", false, why + " (yet)");
  if (c.auto_batch_size) rc.decide("auto_batch_size", false, why + ": each stage's device has its own memory");
}

void Parallelism::connect(const Config& c, Recipe& recipe) {
  if (!mesh_.data_parallel()) return;
  if (!mesh_.comm) throw std::logic_error("Parallelism: several ranks and no Comm");
  device_ = recipe.device;
  time_limit_ = c.time_limit;
  mesh_.comm->connect(recipe.cuda ? recipe.device.index() : -1);
  const double mb = c.ddp_bucket_mb;
  recipe.report.push_back(
      {"data parallel", fmt::format("{} ranks over {} ({}); gradients {} {}", mesh_.ranks.world_size,
                                    recipe.cuda ? "NCCL" : "Gloo", mesh_.ranks.describe(),
                                    c.shard == "none" ? "all-reduced" : "reduce-scattered",
                                    mb > 0 ? fmt::format("in {:g} MiB buckets during backward", mb)
                                           : std::string("in one bucket after backward (--ddp_bucket_mb 0)"))});
}

void Parallelism::compose(Trainer& trainer, const DataSplits& data, const FirstBatch& first_batch, ResolvedConfig& rc,
                          Recipe& recipe, const MachineInfo& machine) {
  const Config& c = rc.resolved;
  mesh_.stages = stage_devices(c, recipe, machine);
  if (mesh_.pipelined()) make_stages(trainer, first_batch, c, recipe);
  if (!mesh_.data_parallel()) return;
  // Before any collective on the model: ranks with other flags or data would trade weights of
  // other shapes (a Gloo abort) or train a job that is none of theirs.
  agree_on_job(*mesh_.comm, c, data.train->size(), data.test->size());
  // Every rank starts from rank 0's weights and buffers (the same seed makes them equal
  // already; a resume loads them on every rank; this makes it certain).
  std::vector<torch::Tensor> state;
  for (const auto& p : trainer.model().parameters()) state.push_back(p.detach());
  for (const auto& b : trainer.model().buffers()) state.push_back(b);
  mesh_.comm->broadcast(state, 0);
  // Then each rank its own random stream (dropout masks), rank 0 the one-process one; a
  // resume puts back each rank's saved state.
  if (mesh_.ranks.rank > 0)
    torch::manual_seed(mix_seed(static_cast<uint64_t>(c.seed), 0x7a4bu, static_cast<uint64_t>(mesh_.ranks.rank)));
  if (c.balance == "auto") {
    // The probe times the whole model on one device; with stages each rank's time is its
    // pipeline's, which it does not measure yet.
    if (mesh_.pipelined())
      throw usage_error("--balance auto with --pipeline_stages: not measured through the stages yet",
                        "give each rank's batch with --rank_batch_sizes");
    balance(trainer, first_batch, rc, recipe);
  }
  const ShardMode mode = c.shard == "optimizer"   ? ShardMode::kOptimizer
                        : c.shard == "gradients" ? ShardMode::kGradients
                                                 : ShardMode::kNone;
  auto hooks = std::make_unique<DataParallelHooks>(trainer.model(), *mesh_.comm, c.ddp_bucket_mb, c.sync_bn, mode);
  hooks_ = hooks.get();
  if (mode != ShardMode::kNone) shard_optimizer(trainer, c, recipe);
  const int norms = hooks->synced_norms();
  trainer.add_hooks(std::move(hooks));
  trainer.set_batch_share(static_cast<double>(c.batch_size) / static_cast<double>(global_batch_size(c.batch_size)));
  if (c.sync_bn)
    recipe.report.push_back({"sync_bn", norms > 0 ? fmt::format("{} BatchNorm layers use the global batch's statistics", norms)
                                                  : fmt::format("no BatchNorm layer in {}: nothing to synchronize", c.model)});
}

std::vector<torch::Device> Parallelism::stage_devices(const Config& c, const Recipe& recipe,
                                                      const MachineInfo& machine) const {
  const int64_t n = c.pipeline_stages;
  if (n == 1) return {};
  if (!recipe.cuda) {
    // The CPU stages share one random generator: a recomputed block's dropout mask could be drawn
    // after another stage's draws and differ from the forward's.
    if (c.grad_checkpointing && c.dropout > 0)
      throw usage_error(fmt::format("--grad_checkpointing with --dropout {} and pipeline stages on a CPU", c.dropout),
                        "the stage threads share one random generator: drop one of the two, or run the stages on GPUs");
    return std::vector<torch::Device>(static_cast<size_t>(n), torch::kCPU);  // a thread each
  }
  const int64_t first = recipe.device.index(), gpus = static_cast<int64_t>(machine.gpus.size());
  if (first + n > gpus)
    throw usage_error(fmt::format("--pipeline_stages {} from cuda:{} needs {} GPUs; this machine has {}", n, first, first + n, gpus),
                      "use fewer stages, or --device cpu (each stage a thread)");
  std::vector<torch::Device> devices;
  for (int64_t i = 0; i < n; ++i) devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(first + i));
  return devices;
}

void Parallelism::make_stages(Trainer& trainer, const FirstBatch& first_batch, const Config& c, Recipe& recipe) {
  Net& net = trainer.model();
  // A language model's head is its token embedding (gpt: tied, one tensor): any cut would put
  // that tensor on the first stage and the last, so such a model declares no pieces.
  const bool tied_head = family(c.model).linear_head && (c.model == "gpt" || c.tie_embeddings);
  const std::string tied =
      tied_head ? ": its head is its token embedding (tied), which would sit on the first stage and the last" : "";
  if (net.pieces().empty())
    throw usage_error(fmt::format("--pipeline_stages {}: model '{}' cannot be split into stages{}", c.pipeline_stages,
                                  c.model, tied),
                      "models that split: " + join(model_names_where([](const Family& f) { return f.pieces; }), ", "));
  const size_t pieces = net.pieces().size();
  if (pieces < mesh_.stages.size()) {
    const auto& options = family(c.model).options;
    const bool deeper = std::find(options.begin(), options.end(), "depth") != options.end();
    throw usage_error(fmt::format("--pipeline_stages {}: model '{}' splits into at most {} stages", mesh_.stages.size(),
                                  c.model, pieces),
                      deeper ? fmt::format("use at most {} stages, or a deeper model (--depth)", pieces)
                             : fmt::format("use at most {} stages ('{}' has no --depth)", pieces, c.model));
  }
  std::vector<double> costs;  // empty: by parameter count
  std::string measured;
  if (c.stage_balance == "time") {
    // Each piece's forward and backward on one micro-batch of training data, on this device, in
    // the run's precision; the generators and batch-norm statistics are put back.
    const auto batch = first_batch(std::max<int64_t>(1, c.batch_size / c.micro_batches));
    if (!batch) throw runtime_error("--stage_balance time: no training batch to time");
    KeepRng keep_rng(recipe.device);
    TensorSnapshot buffers(net, /*with_parameters=*/false);
    net.train();
    {
      AutocastGuard autocast(recipe.precision.amp, recipe.device.type(), recipe.precision.dtype);
      costs = piece_seconds(net.pieces(), batch->x());
    }
    buffers.restore();
    trainer.optimizer().zero_grad();
    std::vector<std::string> ms;
    for (double t : costs) ms.push_back(fmt::format("{:.2f}", 1000 * t));
    measured = fmt::format("; cut by measured piece times (ms: {})", join(ms, " "));
  }
  PipelineOptions o;
  o.stages = split_model(net.pieces(), c.model, mesh_.stages, costs);
  o.micro_batches = c.micro_batches;
  o.schedule = c.pipeline_schedule == "gpipe" ? PipelineSchedule::kGpipe : PipelineSchedule::k1f1b;
  o.threads_per_stage = std::max(1, at::get_num_threads() / static_cast<int>(o.stages.size()));
  o.precision = &recipe.precision;
  auto pipeline = std::make_unique<Pipeline>(net.pieces(), o);
  pipeline_ = pipeline.get();
  trainer.set_forward_backward(pipeline_forward_backward(std::move(pipeline), recipe.device));
  recipe.report.push_back(
      {"pipeline", fmt::format("{} stages x {} micro-batches, {}: {}; {} intra-op thread{} per stage{}", o.stages.size(),
                               o.micro_batches, c.pipeline_schedule, describe_stages(net.pieces(), o.stages),
                               o.threads_per_stage, o.threads_per_stage == 1 ? "" : "s", measured)});
}

void Parallelism::balance(Trainer& trainer, const FirstBatch& first_batch, ResolvedConfig& rc, Recipe& recipe) {
  const Config c = rc.resolved;
  const int world = mesh_.ranks.world_size, rank = mesh_.ranks.rank;
  if (!c.rank_batch_sizes.empty())
    throw usage_error("--balance auto and --rank_batch_sizes both set", "give the sizes, or let --balance auto find them");
  // Each rank times forward and backward on --batch_size samples of the training data (the median
  // of 5 steps after a warm-up); the generators and batch-norm statistics are put back. On a
  // GPU the step's peak memory per sample, against what the device has left, says how many
  // samples fit.
  const auto batch = first_batch(c.batch_size);
  if (!batch) throw runtime_error("--balance auto: no training batch to time");
  const int dev = recipe.cuda ? recipe.device.index() : -1;
  int64_t base = 0;
  if (dev >= 0) {
    cuda_synchronize(dev);
    cuda_reset_peak(dev);
    base = cuda_peak_allocated(dev);  // what the model and optimizer hold before the step
  }
  double seconds = 0, capacity = 0;
  {
    KeepRng keep_rng(recipe.device);
    TensorSnapshot buffers(trainer.model(), /*with_parameters=*/false);
    // The median of 5 steps: one step that a busy host delays must not decide the split.
    constexpr int kSteps = 5;
    std::vector<double> took_each;
    for (int i = 0; i <= kSteps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      trainer.probe(*batch);  // syncs with a GPU
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (faults().slow_rank == rank) {  // a quarter of the speed: load on a shared host moves times less
        std::this_thread::sleep_for(std::chrono::duration<double>(3 * took));
        took *= 4;
      }
      if (i > 0) took_each.push_back(took);
    }
    std::nth_element(took_each.begin(), took_each.begin() + kSteps / 2, took_each.end());
    seconds = took_each[kSteps / 2];
    buffers.restore();
  }
  if (dev >= 0) {
    const double per_sample = static_cast<double>(cuda_peak_allocated(dev) - base) / static_cast<double>(c.batch_size);
    const double room = static_cast<double>(cuda_free_bytes(dev) + cuda_peak_reserved(dev) - base);
    if (per_sample > 0) capacity = std::max(1.0, 0.9 * room / per_sample);
  }
  // Every rank's time and capacity, then sizes proportional to speed, within memory, that add
  // up to the global batch.
  auto all = torch::zeros({2 * world}, torch::TensorOptions().dtype(torch::kDouble).device(recipe.device));
  all[2 * rank] = seconds;
  all[2 * rank + 1] = capacity;
  mesh_.comm->all_reduce_sum(all)->wait();
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
  rc.decide("balance", "auto", "measured before training: see rank_batch_sizes");
  rc.decide("rank_batch_sizes", join(texts, ","), why);
  rc.decide("batch_size", sizes[static_cast<size_t>(rank)], fmt::format("rank {}'s of {}", rank, join(texts, ",")));
  recipe.report.push_back({"balance", fmt::format("rank batch sizes {} ({})", join(texts, ","), why)});
}

void Parallelism::shard(LoaderOptions& o) const {
  o.rank = mesh_.ranks.rank;
  o.world_size = mesh_.ranks.world_size;
  o.rank_batch_sizes = rank_batch_sizes_;
}

int64_t Parallelism::global_batch_size(int64_t batch_size) const {
  int64_t sum = 0;
  for (int64_t b : rank_batch_sizes_) sum += b;
  return rank_batch_sizes_.empty() ? batch_size * mesh_.ranks.world_size : sum;
}

std::vector<int> Parallelism::node_gpus(const Recipe& recipe, const MachineInfo& machine) const {
  if (!recipe.cuda) return {};
  const RankEnv& e = mesh_.ranks;
  if (e.world_size == 1) {
    if (!mesh_.pipelined()) return {recipe.device.index()};
    std::vector<int> stages;
    for (const auto& d : mesh_.stages) stages.push_back(d.index());
    return stages;
  }
  // As plan() places them: local rank r on visible GPUs r x stages onwards.
  std::vector<int> gpus;
  const int visible = std::max<int>(1, static_cast<int>(machine.gpus.size()));
  const int per_rank = std::max<int>(1, static_cast<int>(mesh_.stages.size()));
  for (int g = 0; g < std::min(e.local_world_size * per_rank, visible); ++g) gpus.push_back(g);
  return gpus;
}

void Parallelism::shard_optimizer(Trainer& trainer, const Config& c, Recipe& recipe) {
  Sharding s;
  int64_t elements = 0;
  for (auto& piece : hooks_->sync().pieces()) {
    elements += piece.flat.numel();
    s.pieces.push_back({piece.param, piece.offset, piece.flat});
  }
  Comm& comm = *mesh_.comm;
  // On the collectives' device: a rank whose slices hold no gradient has a CPU zero for a
  // norm, which NCCL would refuse on that rank alone.
  const torch::Device device = recipe.device;
  s.sum_over_ranks = [&comm, device](torch::Tensor& t) {
    if (t.device() != device) t = t.to(device);
    comm.all_reduce_sum(t)->wait();
  };
  GradSync& sync = hooks_->sync();
  s.gather = [&sync] { sync.gather(); };
  trainer.optimizer().shard(std::move(s));
  if (Ema* ema = trainer.ema()) {  // the average of this rank's slices alone, laid out as they are
    EmaSharding e;
    const auto slices = sync.new_slices();
    for (const auto& piece : sync.pieces(slices)) e.average.push_back({piece.param, piece.offset, piece.flat});
    for (const auto& piece : trainer.optimizer().pieces()) e.updated.push_back(piece.flat);
    e.gather = [&sync, slices](const std::vector<torch::Tensor>& whole) { sync.gather(slices, whole); };
    ema->shard(trainer.model(), std::move(e));
  }
  recipe.report.push_back(
      {"sharding", fmt::format("--shard {} (ZeRO-{}): rank {} updates {} of the {} trainable elements and keeps their "
                               "optimizer state; the updated slices are all-gathered after each step{}{}",
                               c.shard, c.shard == "optimizer" ? 1 : 2, mesh_.ranks.rank, elements,
                               trainable_elements(trainer.model()),
                               c.shard == "gradients" ? "; full gradients are freed as soon as their bucket is reduced, "
                                                        "every micro-batch"
                                                      : "",
                               trainer.ema() ? "; the EMA of those slices alone, gathered for evaluations and saves" : "")});
}

std::string Parallelism::save_shards(const std::string& checkpoint_path, Trainer& trainer) const {
  Comm& comm = *mesh_.comm;
  const int rank = mesh_.ranks.rank, world = mesh_.ranks.world_size;
  const int64_t n = ++shard_saves_;
  struct Saving {  // a stop signal must not end the save it asked for (Comm::set_saving)
    Comm& comm;
    explicit Saving(Comm& c) : comm(c) { comm.set_saving(true); }
    ~Saving() { comm.set_saving(false); }
  } saving(comm);
  // Rank 0 names the save (a fresh folder each time: the previous checkpoint's files stay whole
  // until the new checkpoint replaces it).
  ShardSave save;
  if (rank == 0) save = new_shard_save(checkpoint_path, world);
  const auto named = nlohmann::json::parse(
      comm.share(fmt::format("shard_save/{}", n), rank == 0 ? nlohmann::json{save.folder, save.id}.dump() : ""));
  save = {named[0].get<std::string>(), named[1].get<std::string>(), world};
  // Nothing here throws on one rank alone: the others would wait for it in the gather.
  std::string error, pieces;
  try {
    write_shard_file(save, rank, trainer.optimizer());
    pieces = shard_pieces(trainer.optimizer());
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Each rank's error (empty: written) and its pieces, which the index lists file by file.
  const auto told = comm.gather(fmt::format("shard_written/{}", n),
                                // (an OS error's text may not be UTF-8: replaced, never thrown on one rank)
                                nlohmann::json{error, pieces}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (rank != 0) {
    if (!error.empty()) throw runtime_error(fmt::format("rank {} could not write its shard file: {}", rank, error));
    return "";
  }
  std::vector<std::string> file_pieces;
  for (int r = 0; r < world; ++r) {
    const auto j = nlohmann::json::parse(told[static_cast<size_t>(r)]);
    if (const auto e = j[0].get<std::string>(); !e.empty())
      throw runtime_error(fmt::format("rank {} could not write its shard file: {}", r, e),
                          "check that its disk has room and the run folder is writable from every node");
    file_pieces.push_back(j[1].get<std::string>());
  }
  for (int r = 0; r < world; ++r)
    if (!std::filesystem::exists(shard_file(save.folder, r, world)))
      throw runtime_error(fmt::format("shard file '{}' that rank {} wrote is not in rank 0's folder",
                                      shard_file(save.folder, r, world), r),
                          "sharded checkpoints need a run folder every rank sees (a shared file system), as "
                          "torch.distributed.checkpoint does; or train with --shard none");
  return shard_index(save, checkpoint_path, trainer.optimizer(), trainer.model(), file_pieces);
}

double Parallelism::take_comm_seconds() const { return hooks_ ? hooks_->take_wait_seconds() : 0; }

}  // namespace gputrain
