// The training state's memory (state_memory.h).
#include "train/state_memory.h"

#include <fmt/format.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "core/text.h"

namespace gputrain {
namespace {

// The optimizer's state tensors per trainable parameter, in parameter-sized units.
int slots(Optimizer& optimizer) {
  if (optimizer.kind() != OptimizerKind::kSGD) return 2;  // exp_avg, exp_avg_sq
  const auto& groups = optimizer.param_groups();
  const auto* sgd = groups.empty() ? nullptr : dynamic_cast<const torch::optim::SGDOptions*>(&groups.front().options());
  return sgd && sgd->momentum() != 0 ? 1 : 0;  // momentum_buffer
}

int64_t bytes(const torch::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

}  // namespace

std::string StateMemory::text(const Optimizer& optimizer) const {
  const char* what = optimizer.kind() != OptimizerKind::kSGD ? "two moments" : this->optimizer > 0 ? "momentum" : "no momentum";
  return fmt::format("parameters {}, gradients {}, {} state {} ({}){}", format_bytes(static_cast<double>(parameters)),
                     format_bytes(static_cast<double>(gradients)), optimizer.name(), format_bytes(static_cast<double>(this->optimizer)),
                     what, ema < 0 ? "" : ", ema " + format_bytes(static_cast<double>(ema)));
}

namespace {

StateMemory state_memory(Net& model, Optimizer& optimizer, bool sharded, bool full_gradients) {
  StateMemory m;
  const int per_param = slots(optimizer);
  for (const auto& p : model.parameters()) {
    m.parameters += bytes(p);
    if (!p.requires_grad()) continue;
    if (!sharded || full_gradients) m.gradients += bytes(p);
    if (!sharded) m.optimizer += per_param * bytes(p);
  }
  if (sharded)
    for (const auto& piece : optimizer.pieces()) {
      if (!full_gradients) m.gradients += bytes(piece.flat);  // the slices' sums (with full ones, after they are freed)
      m.optimizer += per_param * bytes(piece.flat);
    }
  return m;
}

}  // namespace

StateMemory expected_state_memory(Net& model, Optimizer& optimizer, bool full_gradients, const Ema* ema) {
  StateMemory m = state_memory(model, optimizer, optimizer.sharded(), full_gradients);
  if (ema) {
    m.ema = 0;
    for (const auto& t : ema->held()) m.ema += bytes(t);
  }
  return m;
}

StateMemory unsharded_state_memory(Net& model, Optimizer& optimizer, const Ema* ema) {
  StateMemory m = state_memory(model, optimizer, false, true);
  if (ema) {
    m.ema = 0;
    for (const auto& t : ema->layout()) m.ema += static_cast<int64_t>(t.nbytes());  // meta tensors: the whole sizes
  }
  return m;
}

int64_t optimizer_state_bytes(Optimizer& optimizer) {
  int64_t total = 0;
  for (const auto& [key, state] : optimizer.state()) {
    if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(state.get()))
      total += bytes(s->exp_avg()) + bytes(s->exp_avg_sq()) + bytes(s->max_exp_avg_sq());
    else if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(state.get()))
      total += bytes(a->exp_avg()) + bytes(a->exp_avg_sq()) + bytes(a->max_exp_avg_sq());
    else if (const auto* g = dynamic_cast<const torch::optim::SGDParamState*>(state.get()))
      total += bytes(g->momentum_buffer());
  }
  return total;
}

}  // namespace gputrain
