// Optimizer state <-> plain data. LibTorch's own Optimizer::save writes TorchScript archives
// keyed by tensor addresses; this keeps PyTorch's layout instead (parameters by position).
#include "train/optimizer_state.h"

#include <cmath>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <fmt/format.h>

#include "core/text.h"
#include "step/optimizer.h"
#include "weights/pickle_writer.h"

namespace gputrain {
namespace {

using torch::optim::AdamOptions;
using torch::optim::AdamParamState;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

using Kind = OptimizerKind;

// The step count kept as PyTorch keeps it, a 0-d tensor; float64 holds every count exactly.
torch::Tensor step_tensor(int64_t step) { return torch::full({}, static_cast<double>(step), torch::kDouble); }

int64_t step_of(const torch::Tensor& t) {
  if (t.numel() != 1 || t.scalar_type() == torch::kBool)
    throw std::runtime_error("its optimizer state has a step count that is not one number");
  const double v = t.to(torch::kDouble).item<double>();
  if (!std::isfinite(v) || v < 0 || v > 9.0e15 || v != std::floor(v))
    throw std::runtime_error(fmt::format("its optimizer state has the step count {}", v));
  return static_cast<int64_t>(v);
}

template <class Options>
void capture_adam_options(const Options& o, OptimizerState::Group& g) {
  g.numbers = {{"lr", o.lr()}, {"eps", o.eps()}, {"weight_decay", o.weight_decay()}};
  g.betas = {std::get<0>(o.betas()), std::get<1>(o.betas())};
  g.flags = {{"amsgrad", o.amsgrad()}};
}

// Options as a run could have set them: finite, non-negative, betas below 1, eps above 0, and no
// amsgrad (gputrain never turns it on, so its state would be missing).
void check_options(const OptimizerState::Group& g) {
  for (const auto& [name, v] : g.numbers)
    if (!std::isfinite(v) || v < 0 || (name == "eps" && v == 0))
      throw std::runtime_error(fmt::format("its optimizer's '{}' is {}", name, v));
  if (g.betas && !(g.betas->first >= 0 && g.betas->first < 1 && g.betas->second >= 0 && g.betas->second < 1))
    throw std::runtime_error(fmt::format("its optimizer's betas are ({}, {})", g.betas->first, g.betas->second));
  if (auto it = g.flags.find("amsgrad"); it != g.flags.end() && it->second)
    throw std::runtime_error("its optimizer uses amsgrad, which gputrain never turns on");
}

template <class Options>
void apply_adam_options(Options& o, const OptimizerState::Group& g) {
  if (auto it = g.numbers.find("lr"); it != g.numbers.end()) o.lr(it->second);
  if (auto it = g.numbers.find("eps"); it != g.numbers.end()) o.eps(it->second);
  if (auto it = g.numbers.find("weight_decay"); it != g.numbers.end()) o.weight_decay(it->second);
  if (g.betas) o.betas({g.betas->first, g.betas->second});
  if (auto it = g.flags.find("amsgrad"); it != g.flags.end()) o.amsgrad(it->second);
}

// A copy of `stored` laid out as `param` (its device, dtype check, and memory format), so that
// the update runs on the same layout as before the checkpoint.
torch::Tensor like_param(const torch::Tensor& stored, const torch::Tensor& param, const std::string& what) {
  if (stored.sizes() != param.sizes() || stored.scalar_type() != param.scalar_type())
    throw std::runtime_error(fmt::format("its optimizer state ({} {} {}) does not match a parameter ({} {})", what,
                                         c10::toString(stored.scalar_type()), shape_text(stored.sizes().vec()),
                                         c10::toString(param.scalar_type()), shape_text(param.sizes().vec())));
  torch::NoGradGuard no_grad;
  torch::Tensor out = torch::empty_like(param).copy_(stored);
  if (out.is_floating_point() && !torch::isfinite(out).all().item<bool>())
    throw std::runtime_error("it holds non-finite optimizer state ('" + what + "')");
  return out;
}

const torch::Tensor* find(const std::map<std::string, torch::Tensor>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() || !it->second.defined() ? nullptr : &it->second;
}

const torch::Tensor& need(const std::map<std::string, torch::Tensor>& m, const char* key, Kind kind) {
  if (const torch::Tensor* t = find(m, key)) return *t;
  throw std::runtime_error(fmt::format("its optimizer state has no '{}' for a parameter ({} keeps one)", key,
                                       kind == Kind::kSGD ? "SGD with momentum" : "Adam"));
}

template <class State>
std::unique_ptr<torch::optim::OptimizerParamState> adam_state(const std::map<std::string, torch::Tensor>& m,
                                                              const torch::Tensor& p, Kind kind) {
  auto s = std::make_unique<State>();
  s->step(step_of(need(m, "step", kind)));
  s->exp_avg(like_param(need(m, "exp_avg", kind), p, "exp_avg"));
  s->exp_avg_sq(like_param(need(m, "exp_avg_sq", kind), p, "exp_avg_sq"));
  // A second moment is a running mean of squares: a negative one would make the update NaN.
  if ((s->exp_avg_sq() < 0).any().template item<bool>()) throw std::runtime_error("its optimizer state has a negative exp_avg_sq");
  if (const torch::Tensor* t = find(m, "max_exp_avg_sq")) s->max_exp_avg_sq(like_param(*t, p, "max_exp_avg_sq"));
  return s;
}

}  // namespace

OptimizerState capture_optimizer_state(Optimizer& optimizer) {
  optimizer.sync_steps();
  const Kind kind = optimizer.kind();
  OptimizerState out;
  int64_t index = 0;
  for (auto& group : optimizer.param_groups()) {
    OptimizerState::Group g;
    if (kind == Kind::kAdamW) capture_adam_options(static_cast<const AdamWOptions&>(group.options()), g);
    if (kind == Kind::kAdam) capture_adam_options(static_cast<const AdamOptions&>(group.options()), g);
    if (kind == Kind::kSGD) {
      const auto& o = static_cast<const SGDOptions&>(group.options());
      g.numbers = {{"lr", o.lr()}, {"momentum", o.momentum()}, {"dampening", o.dampening()},
                   {"weight_decay", o.weight_decay()}};
      g.flags = {{"nesterov", o.nesterov()}};
    }
    for (const auto& p : group.params()) {
      g.params.push_back(index);
      auto it = optimizer.state().find(p.unsafeGetTensorImpl());
      if (it != optimizer.state().end()) {
        auto& m = out.state[index];
        auto adam = [&m](const auto& s) {
          m = {{"step", step_tensor(s.step())}, {"exp_avg", s.exp_avg()}, {"exp_avg_sq", s.exp_avg_sq()}};
          if (s.max_exp_avg_sq().defined()) m["max_exp_avg_sq"] = s.max_exp_avg_sq();
        };
        // The optimizer's kind says its state's type (make_optimizer builds these three only).
        if (kind == Kind::kAdamW) adam(static_cast<const AdamWParamState&>(*it->second));
        if (kind == Kind::kAdam) adam(static_cast<const AdamParamState&>(*it->second));
        if (kind == Kind::kSGD) {
          const auto& s = static_cast<const SGDParamState&>(*it->second);
          if (s.momentum_buffer().defined()) m["momentum_buffer"] = s.momentum_buffer();
        }
      }
      ++index;
    }
    out.groups.push_back(std::move(g));
  }
  return out;
}

void write_optimizer_state(PickleWriter& out, const OptimizerState& state) {
  out.begin_dict();
  out.text("state");
  out.begin_dict();
  for (const auto& [index, tensors] : state.state) {
    out.integer(index);
    out.begin_dict();
    for (const auto& [name, t] : tensors) {
      out.text(name);
      out.tensor(t);
    }
    out.end();
  }
  out.end();
  out.text("param_groups");
  out.begin_list();
  for (const auto& g : state.groups) {
    out.begin_dict();
    for (const auto& [name, v] : g.numbers) {
      out.text(name);
      out.number(v);
    }
    for (const auto& [name, v] : g.flags) {
      out.text(name);
      out.boolean(v);
    }
    if (g.betas) {
      out.text("betas");
      out.begin_tuple();
      out.number(g.betas->first);
      out.number(g.betas->second);
      out.end();
    }
    out.text("params");
    out.begin_list();
    for (int64_t i : g.params) out.integer(i);
    out.end();
    out.end();
  }
  out.end();
  if (!state.shards.empty()) {
    out.text("gputrain_shards");
    out.text(state.shards);
  }
  out.end();
}

void apply_optimizer_state(Optimizer& optimizer, const OptimizerState& state) {
  const Kind kind = optimizer.kind();
  auto& groups = optimizer.param_groups();
  if (state.groups.size() != groups.size())
    throw std::runtime_error(fmt::format("its optimizer has {} parameter groups, this run's {}", state.groups.size(),
                                         groups.size()));
  std::vector<torch::Tensor> params;  // by position, over all groups
  for (size_t i = 0; i < groups.size(); ++i) {
    const auto& g = state.groups[i];
    if (g.params.size() != groups[i].params().size())
      throw std::runtime_error(fmt::format("its optimizer's group {} has {} parameters, this run's {}", i,
                                           g.params.size(), groups[i].params().size()));
    for (size_t j = 0; j < g.params.size(); ++j)
      if (g.params[j] != static_cast<int64_t>(params.size() + j))
        throw std::runtime_error("its optimizer's parameter groups are not numbered in order");
    for (const auto& p : groups[i].params()) params.push_back(p);
    check_options(g);
  }
  // Everything is built before anything changes: a refused state leaves the optimizer as it was.
  ska::flat_hash_map<void*, std::unique_ptr<torch::optim::OptimizerParamState>> loaded;
  for (const auto& [index, tensors] : state.state) {
    if (index < 0 || index >= static_cast<int64_t>(params.size()))
      throw std::runtime_error(fmt::format("its optimizer state names parameter {} of {}", index, params.size()));
    const torch::Tensor& p = params[index];
    std::unique_ptr<torch::optim::OptimizerParamState> s;
    if (kind == Kind::kAdamW) s = adam_state<AdamWParamState>(tensors, p, kind);
    if (kind == Kind::kAdam) s = adam_state<AdamParamState>(tensors, p, kind);
    if (kind == Kind::kSGD) {
      if (find(tensors, "exp_avg")) throw std::runtime_error("its optimizer state is Adam's, and this run uses SGD");
      auto sgd = std::make_unique<SGDParamState>();
      if (const torch::Tensor* t = find(tensors, "momentum_buffer"))
        sgd->momentum_buffer(like_param(*t, p, "momentum_buffer"));
      s = std::move(sgd);
    }
    loaded[p.unsafeGetTensorImpl()] = std::move(s);
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const auto& g = state.groups[i];
    if (kind == Kind::kAdamW) apply_adam_options(static_cast<AdamWOptions&>(groups[i].options()), g);
    if (kind == Kind::kAdam) apply_adam_options(static_cast<AdamOptions&>(groups[i].options()), g);
    if (kind == Kind::kSGD) {
      auto& o = static_cast<SGDOptions&>(groups[i].options());
      if (auto it = g.numbers.find("lr"); it != g.numbers.end()) o.lr(it->second);
      if (auto it = g.numbers.find("momentum"); it != g.numbers.end()) o.momentum(it->second);
      if (auto it = g.numbers.find("dampening"); it != g.numbers.end()) o.dampening(it->second);
      if (auto it = g.numbers.find("weight_decay"); it != g.numbers.end()) o.weight_decay(it->second);
      if (auto it = g.flags.find("nesterov"); it != g.flags.end()) o.nesterov(it->second);
    }
  }
  optimizer.state() = std::move(loaded);
  optimizer.steps_loaded();
}

}  // namespace gputrain
