// Checkpoints written atomically (temporary file, fsync, rename, fsync of the folder) as plain
// data in torch.save's layout, and loaded into a Trainer only once every part has been checked.
#include "train/checkpoint.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/device_cuda.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/text.h"
#include "train/optimizer_state.h"
#include "train/shard_checkpoint.h"
#include "weights/safetensors.h"
#include "weights/unpickler.h"

namespace gputrain {

namespace {

// The moving average under the model's names.
NamedTensors named(const Ema& ema) {
  NamedTensors out;
  const auto tensors = ema.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) out.emplace_back(ema.names()[i], tensors[i]);
  return out;
}

// Its names with each tensor's shape and dtype (meta tensors): what a stored average must fit,
// sharded or whole.
NamedTensors named_layout(const Ema& ema) {
  NamedTensors out;
  const auto layout = ema.layout();
  for (size_t i = 0; i < layout.size(); ++i) out.emplace_back(ema.names()[i], layout[i]);
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, Trainer& trainer, const CheckpointMeta& meta, const std::string& shards) {
  if (trainer.optimizer().sharded() && shards.empty())
    throw std::logic_error("save_checkpoint: a sharded optimizer's state is in shard files, and no index names them");
  CheckpointData c;
  c.meta = meta;
  c.model = model_tensors(trainer.model());
  if (const Ema* ema = trainer.ema()) c.ema = named(*ema);
  if (trainer.optimizer().sharded()) {
    c.optimizer = optimizer_groups(trainer.optimizer());
    c.optimizer.shards = shards;
  } else {
    c.optimizer = capture_optimizer_state(trainer.optimizer());
  }
  std::tie(c.scale, c.growth_tracker) = trainer.scaler().state();
  for (const auto& [name, t] : trainer.step_state()) c.step_state.emplace_back(name, t.cpu());
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    c.rng_cpu = gen.get_state();
  }
  const auto& ctx = trainer.context();
  if (ctx.cuda) c.rng_cuda = cuda_rng_state(ctx.device.index());

  AtomicFile file(path);
  write_checkpoint(c, [&file](const void* data, size_t size) { return file.write(data, size); });
  // Test hook: GPUTRAIN_FAULT_KILL_IN_SAVE=N dies by SIGKILL inside the N-th save, between
  // writing the temporary file and renaming it: the worst moment for a crash.
  static int saves = 0;
  if (++saves == faults().kill_in_save) std::raise(SIGKILL);
  file.commit();
}

CheckpointMeta read_checkpoint_meta(const std::string& path) {
  return read_checkpoint_file(path, CheckpointParts::Meta).meta;
}

nlohmann::json checkpoint_record(const std::string& path, const CheckpointMeta& meta) {
  auto record = nlohmann::json::parse(meta.config_json, nullptr, false);
  if (!record.is_object())
    throw usage_error("checkpoint '" + path + "' holds no configuration record to rebuild its run from",
                      kDamagedCheckpointHint);
  return record;
}

namespace {

// The dtypes a model's parameters and buffers can have. A damaged file can name any storage
// type the reader knows; the ones a weight never has are refused here.
bool weight_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat:
    case c10::kDouble:
    case c10::kHalf:
    case c10::kBFloat16:
    case c10::kLong:
    case c10::kInt:
    case c10::kShort:
    case c10::kChar:
    case c10::kByte:
    case c10::kBool:
      return true;
    default:
      return false;
  }
}

void check_dtypes(const NamedTensors& tensors, const std::string& path) {
  for (const auto& [name, t] : tensors)
    if (!weight_dtype(t.scalar_type()))
      throw usage_error(fmt::format("checkpoint '{}' cannot be loaded: tensor '{}' has dtype {}, which no model weight has",
                                    path, name, c10::toString(t.scalar_type())),
                        kDamagedCheckpointHint);
}

}  // namespace

CheckpointWeights read_checkpoint_weights(const std::string& path) {
  CheckpointData c = read_checkpoint_file(path);
  check_dtypes(c.model, path);
  check_dtypes(c.ema, path);
  return {std::move(c.meta), std::move(c.model), std::move(c.ema)};
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  std::vector<std::pair<int64_t, std::filesystem::path>> epochs;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.rfind("epoch-", 0) == 0 && name.ends_with(".pt"))
      epochs.push_back({std::stoll(name.substr(6, name.size() - 9)), e.path()});
  }
  std::sort(epochs.begin(), epochs.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < epochs.size(); ++i) std::filesystem::remove(epochs[i].second);
}

namespace {

// The tensors of one parameter's optimizer state, of the type its optimizer's kind keeps.
std::vector<torch::Tensor> moments(OptimizerKind kind, torch::optim::OptimizerParamState& state) {
  auto adam = [](const auto& s) { return std::vector<torch::Tensor>{s.exp_avg(), s.exp_avg_sq(), s.max_exp_avg_sq()}; };
  switch (kind) {
    case OptimizerKind::kAdamW: return adam(static_cast<torch::optim::AdamWParamState&>(state));
    case OptimizerKind::kAdam: return adam(static_cast<torch::optim::AdamParamState&>(state));
    case OptimizerKind::kSGD: return {static_cast<torch::optim::SGDParamState&>(state).momentum_buffer()};
  }
  return {};
}

// "Float 64x3x3x3": the same words the rest of gputrain uses for shapes.
std::string describe(const torch::Tensor& t) {
  std::string s = c10::toString(t.scalar_type());
  s += " ";
  s += shape_text(t.sizes().vec());
  return s;
}

// A checkpoint of another model must not load "successfully" and fail (or broadcast) later:
// every weight of this model is there with its shape and dtype, and nothing else is.
void check_fits(const NamedTensors& stored, const NamedTensors& mine) {
  std::map<std::string, torch::Tensor> by_name(stored.begin(), stored.end());
  if (by_name.size() != stored.size()) throw std::runtime_error("it holds one weight name twice");
  for (const auto& [name, t] : mine) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw std::runtime_error("it holds no '" + name + "' for this model");
    if (it->second.sizes() != t.sizes() || it->second.scalar_type() != t.scalar_type())
      throw std::runtime_error("'" + name + "' is " + describe(it->second) + " there but " + describe(t) +
                               " in this model");
  }
  if (stored.size() != mine.size()) {
    std::map<std::string, torch::Tensor> mine_by_name(mine.begin(), mine.end());
    for (const auto& [name, t] : stored)
      if (!mine_by_name.count(name)) throw std::runtime_error("it holds '" + printable(name) + "', which this model has not");
  }
}

bool finite(const torch::Tensor& t) { return !t.defined() || !t.is_floating_point() || torch::isfinite(t).all().item<bool>(); }

// Whether the weights and the average are finite (the optimizer's state is checked as it is
// copied in); after their shapes were checked against the model's, so each costs what it does.
bool weights_finite(const CheckpointData& c) {
  for (const auto* set : {&c.model, &c.ema})
    for (const auto& [name, t] : *set)
      if (!finite(t)) return false;
  return true;
}

}  // namespace

bool all_finite(Trainer& trainer) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> finite;  // one flag per tensor, on the run's device: a single host sync
  const torch::Device device = trainer.context().device;  // (pipeline stages hold tensors on several)
  auto add = [&](const torch::Tensor& t) {
    if (t.defined() && t.is_floating_point()) finite.push_back(torch::isfinite(t).all().to(device));
  };
  for (const auto& t : trainer.model().parameters()) add(t);
  for (const auto& t : trainer.model().buffers()) add(t);
  if (trainer.ema())
    for (const auto& t : trainer.ema()->held()) add(t);
  for (auto& [key, state] : trainer.optimizer().state())
    for (const auto& t : moments(trainer.optimizer().kind(), *state)) add(t);
  if (!trainer.optimizer().sharded()) return finite.empty() || torch::stack(finite).all().item<bool>();
  // --shard: each rank holds its own slices of the state; the ranks add up what they found.
  auto bad = finite.empty() ? torch::zeros({}, device) : torch::logical_not(torch::stack(finite).all()).to(torch::kFloat);
  trainer.optimizer().sum_over_ranks(bad);
  return bad.item<float>() == 0;
}

RankRng gather_rank_rng(Comm& comm, const Trainer& trainer) {
  RankRng out;
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    out.cpu = torch::stack(comm.all_gather(gen.get_state()));
  }
  const auto& ctx = trainer.context();
  if (ctx.cuda) {
    // NCCL gathers device tensors: the 16-byte state goes there and back.
    auto state = cuda_rng_state(ctx.device.index()).to(ctx.device);
    out.cuda = torch::stack(comm.all_gather(state)).cpu();
  }
  return out;
}

CheckpointMeta load_checkpoint(const std::string& path, Trainer& trainer, int rank) {
  CheckpointData c = read_checkpoint_file(path);
  // Rank 0's state is also the one-process state: one process continuing a run of several goes
  // on as rank 0 went. Rank r > 0 takes its row of the ranks' states, when there is one.
  auto row = [&](const torch::Tensor& own, const torch::Tensor& rows) -> torch::Tensor {
    if (rank == 0) return own;
    if (!rows.defined() || rows.dim() != 2 || rows.size(0) <= rank) return {};
    return rows[rank].clone();  // its own storage: set_state crashed on a view into the rows (torch 2.15)
  };
  const torch::Tensor cpu_rng = row(c.rng_cpu, c.meta.rank_rng.cpu), cuda_rng = row(c.rng_cuda, c.meta.rank_rng.cuda);
  try {
    // A generator's state is a byte tensor of its own fixed size.
    auto fits_state = [](const torch::Tensor& stored, const torch::Tensor& mine) {
      return !stored.defined() || (stored.scalar_type() == torch::kByte && stored.numel() == mine.numel());
    };
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      if (!fits_state(cpu_rng, gen.get_state())) throw std::runtime_error("its random generator state is damaged");
    }
    if (trainer.context().cuda && !fits_state(cuda_rng, cuda_rng_state(trainer.context().device.index())))
      throw std::runtime_error("its CUDA random generator state is damaged");
    const NamedTensors mine = model_tensors(trainer.model());
    check_fits(c.model, mine);
    if (trainer.ema() && !c.ema.empty()) check_fits(c.ema, named_layout(*trainer.ema()));
    if (!weights_finite(c)) throw std::runtime_error("it holds non-finite weights");
    // Everything that can refuse the file runs before the model changes.
    // Sharded on either side, each piece's or parameter's state is cut from where it is kept.
    ShardReads reads;
    apply_optimizer_state(trainer.optimizer(), state_for(trainer.optimizer(), c.optimizer, path, &reads));
    if (reads.files > 0) c.meta.shard_reads = fmt::format("{} of the {} shard files", reads.read, reads.files);
    trainer.scaler().load_state(c.scale, c.growth_tracker);
    trainer.load_step_state(c.step_state);  // a state no hook of this run keeps is passed over
    {
      torch::NoGradGuard no_grad;
      std::map<std::string, torch::Tensor> by_name(c.model.begin(), c.model.end());
      // Copied into the model's own tensors: their device (pipeline stages keep several) and
      // memory format (channels_last) stay as the run set them up.
      for (const auto& [name, t] : mine) t.copy_(by_name.at(name));
    }
    // A run that adds --ema_decay on resume starts its average from the loaded weights.
    if (trainer.ema()) {
      if (c.ema.empty())
        trainer.ema()->restart(trainer.model());
      else
        trainer.ema()->load_state(c.ema);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw usage_error("checkpoint '" + path + "' cannot be loaded: " + what.substr(0, what.find('\n')),
                      kDamagedCheckpointHint);
  }
  if (cpu_rng.defined()) {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(cpu_rng);
  }
  const auto& ctx = trainer.context();
  if (ctx.cuda && cuda_rng.defined()) set_cuda_rng_state(ctx.device.index(), cuda_rng);  // absent from CPU runs
  return c.meta;
}

}  // namespace gputrain
