// An optimizer's state as plain data, laid out as PyTorch's optimizer.state_dict(): what a
// checkpoint holds of SGD, Adam and AdamW (fused or not), so that Python can read it too.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace gputrain {

class Optimizer;
class PickleWriter;

struct OptimizerState {
  struct Group {
    std::map<std::string, double> numbers;  // lr, eps, weight_decay, momentum, dampening
    std::map<std::string, bool> flags;      // amsgrad, nesterov
    std::optional<std::pair<double, double>> betas;
    std::vector<int64_t> params;  // positions in the parameters of all groups, in order
  };
  std::vector<Group> groups;
  // By position: "step" (a 0-d tensor, as PyTorch keeps it), "exp_avg", "exp_avg_sq",
  // "max_exp_avg_sq" (amsgrad) for Adam and AdamW; "momentum_buffer" for SGD.
  std::map<int64_t, std::map<std::string, torch::Tensor>> state;
  // A sharded checkpoint's (train/shard_checkpoint.h): the index of the shard files holding the
  // per-parameter state (JSON text; `state` is then empty). Empty: `state` is all of it.
  std::string shards;
};

// The state of `optimizer` (fused step counts brought up to date first). Tensors are the
// optimizer's own, not copies.
OptimizerState capture_optimizer_state(Optimizer& optimizer);

// Writes `state` as PyTorch's dict {"state": {i: {...}}, "param_groups": [{..., "params": [i]}]}.
void write_optimizer_state(PickleWriter& out, const OptimizerState& state);

// Replaces the state and group options of `optimizer` with `state`, each tensor copied into one
// laid out as its parameter (channels_last stays channels_last). Throws std::runtime_error (for
// the caller to word) when the groups, parameters, shapes or the optimizer's kind do not match.
void apply_optimizer_state(Optimizer& optimizer, const OptimizerState& state);

}  // namespace gputrain
