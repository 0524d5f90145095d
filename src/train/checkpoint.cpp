// Checkpoints written atomically (temporary file, fsync, rename, fsync of the folder).
#include "train/checkpoint.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/device_cuda.h"
#include "core/error.h"
#include "core/faults.h"
#include "config/resolved.h"
#include "core/text.h"
#include "train/checkpoint_file.h"

namespace gputrain {

void save_checkpoint(const std::string& path, Trainer& trainer, const CheckpointMeta& meta) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model, optimizer;
  trainer.model().save(model);
  trainer.optimizer().save(optimizer);
  archive.write("model", model);
  archive.write("optimizer", optimizer);
  trainer.scaler().save(archive);
  if (trainer.ema()) trainer.ema()->save(archive);
  archive.write("meta.format", c10::IValue(fmt::format("gputrain-checkpoint-{}", kCheckpointVersion)));
  archive.write("meta.epoch", c10::IValue(meta.epoch));
  archive.write("meta.samples", c10::IValue(meta.samples));
  archive.write("meta.evaluated", c10::IValue(meta.evaluated));
  archive.write("meta.step", c10::IValue(meta.step));
  archive.write("meta.best_accuracy", c10::IValue(meta.best_score));
  archive.write("meta.config", c10::IValue(meta.config_json));
  archive.write("meta.evals_since_best", c10::IValue(meta.evals_since_best));
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("rng.cpu", gen.get_state());
  }
  const auto& ctx = trainer.context();
  if (ctx.cuda) archive.write("rng.cuda", cuda_rng_state(ctx.device.index()));
  if (meta.rank_rng.cpu.defined()) archive.write("rng.ranks.cpu", meta.rank_rng.cpu);
  if (meta.rank_rng.cuda.defined()) archive.write("rng.ranks.cuda", meta.rank_rng.cuda);

  AtomicFile file(path);
  archive.save_to([&file](const void* data, size_t size) { return file.write(data, size); });
  // Test hook: GPUTRAIN_FAULT_KILL_IN_SAVE=N dies by SIGKILL inside the N-th save, between
  // writing the temporary file and renaming it: the worst moment for a crash.
  static int saves = 0;
  if (++saves == faults().kill_in_save) std::raise(SIGKILL);
  file.commit();
}

namespace {

CheckpointMeta read_meta(torch::serialize::InputArchive& archive, const std::string& path) {
  c10::IValue format, epoch, position, step, best, config, since_best, evaluated;
  const std::string prefix = "gputrain-checkpoint-";
  if (!archive.try_read("meta.format", format) || !format.isString() || format.toStringRef().rfind(prefix, 0) != 0)
    throw std::runtime_error("not written by gputrain (no gputrain format tag)");
  const auto version = parse_integer(format.toStringRef().substr(prefix.size()));
  if (!version || *version < 1) throw std::runtime_error("its format tag is damaged");
  if (*version > kCheckpointVersion)
    throw NewerCheckpoint({fmt::format("checkpoint '{}' has format '{}'; this gputrain reads versions 1 to {}", path,
                                       format.toStringRef().substr(0, 40), kCheckpointVersion)},
                          "continue the run with the gputrain that wrote it, or a newer one (gputrain --version)",
                          kExitUsage);
  CheckpointMeta m;
  archive.read("meta.epoch", epoch);
  archive.read("meta.step", step);
  archive.read("meta.best_accuracy", best);
  archive.read("meta.config", config);
  m.epoch = epoch.toInt();
  m.step = step.toInt();
  m.best_score = best.toDouble();
  m.config_json = config.toStringRef();
  if (*version == 1) {
    archive.read("meta.batch", position);  // micro-batches of the run's global batch
    const int64_t batches = position.toInt();
    const int64_t global = record_global_batch(nlohmann::json::parse(m.config_json, nullptr, false));
    if (batches < 0 || global < 0 || (global > 0 && batches > std::numeric_limits<int64_t>::max() / global) ||
        (batches > 0 && global == 0))
      throw std::runtime_error("its position is out of range");
    m.samples = batches * global;
  } else {
    archive.read("meta.samples", position);
    m.samples = position.toInt();
    m.evaluated = archive.try_read("meta.evaluated", evaluated) && evaluated.toBool();
  }
  if (m.epoch < 0 || m.step < 0 || m.samples < 0) throw std::runtime_error("its position is out of range");
  // Absent in checkpoints written before --early_stopping existed.
  m.evals_since_best = archive.try_read("meta.evals_since_best", since_best) ? since_best.toInt() : 0;
  return m;
}

// Runs `body` on the opened archive; every failure becomes one usage error naming the file.
template <typename F>
auto with_archive(const std::string& path, torch::Device device, F body) {
  try {
    torch::serialize::InputArchive archive = open_checkpoint(path, device);
    return body(archive);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw usage_error("checkpoint '" + path + "' cannot be loaded: " + what.substr(0, what.find('\n')),
                      kDamagedCheckpointHint);
  }
}

}  // namespace

CheckpointMeta read_checkpoint_meta(const std::string& path) {
  return with_archive(path, torch::kCPU, [&](torch::serialize::InputArchive& a) { return read_meta(a, path); });
}

namespace {

// The dtypes a model's parameters and buffers can have. A damaged file can name any storage
// type LibTorch knows (sub-byte integers, float8, quantized), on which ordinary ops throw.
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

// Module::save writes a module's own tensors as attributes and each child as a nested archive.
void collect_weights(torch::serialize::InputArchive& archive, const std::string& prefix,
                     std::vector<std::pair<std::string, torch::Tensor>>& out) {
  for (const auto& key : archive.keys()) {
    torch::serialize::InputArchive child;
    c10::IValue value;
    if (archive.try_read(key, child)) {
      collect_weights(child, prefix + key + ".", out);
    } else if (archive.try_read(key, value) && value.isTensor()) {
      const torch::Tensor& t = value.toTensor();
      if (!weight_dtype(t.scalar_type()))
        throw std::runtime_error("tensor '" + prefix + key + "' has dtype " + c10::toString(t.scalar_type()) +
                                 ", which no model weight has");
      out.emplace_back(prefix + key, t);
    }
  }
}

}  // namespace

CheckpointWeights read_checkpoint_weights(const std::string& path) {
  return with_archive(path, torch::kCPU, [&](torch::serialize::InputArchive& archive) {
    CheckpointWeights w;
    w.meta = read_meta(archive, path);  // refuses files not written by gputrain
    torch::serialize::InputArchive model, ema;
    archive.read("model", model);
    collect_weights(model, "", w.raw);
    if (archive.try_read("ema", ema)) collect_weights(ema, "", w.ema);
    return w;
  });
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

// The tensors of one parameter's optimizer state (SGD, Adam and AdamW: the optimizers gputrain makes).
std::vector<torch::Tensor> moments(torch::optim::OptimizerParamState& state) {
  if (auto* s = dynamic_cast<torch::optim::AdamWParamState*>(&state))
    return {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()};
  if (auto* s = dynamic_cast<torch::optim::AdamParamState*>(&state))
    return {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()};
  if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(&state)) return {s->momentum_buffer()};
  return {};
}

// "Float 64x3x3x3": the same words the rest of gputrain uses for shapes.
std::string describe(const torch::Tensor& t) {
  std::string s = c10::toString(t.scalar_type());
  s += " ";
  s += shape_text(t.sizes().vec());
  return s;
}

// Module::load swaps in each stored tensor whatever its shape, so a checkpoint of another model
// would load "successfully" and fail (or broadcast) later: compare names, shapes and dtypes first.
void check_fits(torch::serialize::InputArchive& archive, Net& model) {
  std::vector<std::pair<std::string, torch::Tensor>> stored;
  collect_weights(archive, "", stored);
  std::map<std::string, torch::Tensor> by_name(stored.begin(), stored.end());
  auto check = [&](const std::string& name, const torch::Tensor& mine) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw std::runtime_error("it holds no '" + name + "' for this model");
    if (it->second.sizes() != mine.sizes() || it->second.scalar_type() != mine.scalar_type())
      throw std::runtime_error("'" + name + "' is " + describe(it->second) + " there but " + describe(mine) +
                               " in this model");
  };
  for (const auto& p : model.named_parameters()) check(p.key(), p.value());
  for (const auto& b : model.named_buffers()) check(b.key(), b.value());
}

// A corrupt file can hold moments of any shape; Adam's update would fail mid-run or broadcast.
void check_optimizer_state(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      auto it = optimizer.state().find(p.unsafeGetTensorImpl());
      if (it == optimizer.state().end()) continue;
      for (const auto& m : moments(*it->second))
        if (m.defined() && (m.sizes() != p.sizes() || m.scalar_type() != p.scalar_type()))
          throw std::runtime_error("its optimizer state (" + describe(m) + ") does not match a parameter (" +
                                   describe(p) + ")");
    }
  }
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
    for (const auto& t : trainer.ema()->tensors()) add(t);
  for (auto& [key, state] : trainer.optimizer().state())
    for (const auto& t : moments(*state)) add(t);
  return finite.empty() || torch::stack(finite).all().item<bool>();
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
  return with_archive(path, trainer.context().device, [&](torch::serialize::InputArchive& archive) {
    CheckpointMeta meta = read_meta(archive, path);
    torch::serialize::InputArchive model, optimizer;
    archive.read("model", model);
    archive.read("optimizer", optimizer);
    check_fits(model, trainer.model());
    trainer.model().load(model);
    trainer.optimizer().load(optimizer);
    check_optimizer_state(trainer.optimizer());
    // Pipeline stages on several devices: the archive is read onto the run's device, which
    // moved every tensor there; each stage's pieces and their optimizer state go back.
    if (Pipeline* p = trainer.pipeline()) {
      p->place();
      torch::NoGradGuard no_grad;
      for (auto& group : trainer.optimizer().param_groups())
        for (const auto& param : group.params())
          if (auto it = trainer.optimizer().state().find(param.unsafeGetTensorImpl()); it != trainer.optimizer().state().end())
            for (auto m : moments(*it->second))
              if (m.defined() && m.device() != param.device()) m.set_data(m.data().to(param.device()));
    }
    trainer.scaler().load(archive);
    // A run that adds --ema_decay on resume starts its average from the loaded weights.
    if (trainer.ema() && !trainer.ema()->load(archive))
      *trainer.ema() = Ema(trainer.model(), trainer.options().ema_decay);
    if (!all_finite(trainer)) throw std::runtime_error("it holds non-finite weights or optimizer state");
    // Rank 0's state is also the one-process state: one process continuing a run of several
    // goes on as rank 0 went.
    auto read_row = [&](const std::string& which, torch::Tensor& out) {
      if (rank == 0) return archive.try_read("rng." + which, out);
      torch::Tensor rows;
      if (!archive.try_read("rng.ranks." + which, rows) || rows.size(0) <= rank) return false;
      out = rows[rank].clone();  // its own storage: set_state crashed on a view into the rows (torch 2.15)
      return true;
    };
    torch::Tensor rng, cuda_rng;
    if (read_row("cpu", rng)) {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      // The archive was read onto the run's device; a generator's state is a CPU byte tensor
      // (the first GPU run's resume failed with "RNG state must be a torch.ByteTensor").
      gen.set_state(rng.cpu());
    }
    const auto& ctx = trainer.context();
    if (ctx.cuda && read_row("cuda", cuda_rng))  // absent in a checkpoint from a CPU run
      set_cuda_rng_state(ctx.device.index(), cuda_rng.cpu());
    return meta;
  });
}

}  // namespace gputrain
