// --ema_decay: an exponential moving average of the weights, evaluated and checkpointed beside them.
#include "step/ema.h"

#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include <ATen/ops/_foreach_lerp.h>

namespace gputrain {

Ema::Ema(torch::nn::Module& module, double decay) : decay_(decay) {
  torch::NoGradGuard no_grad;
  // named_parameters() lists the same tensors in the same order as parameters().
  for (const auto& p : module.named_parameters()) {
    names_.push_back(p.key());
    params_.push_back(p.value().detach().clone());
  }
  for (const auto& b : module.named_buffers()) {
    names_.push_back(b.key());
    buffers_.push_back(b.value().detach().clone());
  }
  for (const auto& t : tensors()) layout_.push_back(t.to(torch::kMeta));  // to() keeps the strides
}

void Ema::update(torch::nn::Module& module, const torch::Tensor& skipped) {
  torch::NoGradGuard no_grad;
  release();  // (a whole average gathered before this step is stale now)
  // The average and what it follows, tensor by tensor: the whole parameters it keeps (all of
  // them, or those that do not train when sharded), then this rank's slices.
  std::vector<torch::Tensor> average, weights, buffers;
  size_t i = 0;
  for (const auto& p : module.parameters()) {
    if (params_[i].defined()) {
      average.push_back(params_[i]);
      weights.push_back(p.detach());
    }
    ++i;
  }
  for (size_t k = 0; k < sharding_.average.size(); ++k) {
    average.push_back(sharding_.average[k].flat);
    weights.push_back(sharding_.updated[k]);
  }
  for (const auto& b : module.buffers()) buffers.push_back(b.detach());
  if (!skipped.defined()) {
    if (!average.empty()) at::_foreach_lerp_(average, weights, 1.0 - decay_);  // one fused kernel over all tensors
    for (size_t j = 0; j < buffers.size(); ++j) buffers_[j].copy_(buffers[j]);
    return;
  }
  // The lerp weight (1 - decay) * (1 - skipped), a device scalar: zero where the step was skipped.
  if (average.empty()) return;
  // (Pipeline stages hold tensors on several devices: each gets the weight on its own.)
  const auto weight = (1.0 - skipped.reshape({})) * (1.0 - decay_);
  std::vector<torch::Tensor> weights_on;
  for (const auto& p : average) weights_on.push_back(weight.device() == p.device() ? weight : weight.to(p.device()));
  at::_foreach_lerp_(average, weights, weights_on);
  for (size_t j = 0; j < buffers.size(); ++j)
    buffers_[j].copy_(torch::where(skipped.reshape({}).to(buffers_[j].device()) > 0, buffers_[j], buffers[j]));
}

void Ema::restart(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  release();
  size_t i = 0;
  for (const auto& p : module.parameters()) {
    if (params_[i].defined()) params_[i].copy_(p.detach());
    ++i;
  }
  for (const auto& piece : sharding_.average)
    piece.flat.copy_(piece.param.detach().reshape(-1).narrow(0, piece.offset, piece.flat.numel()));
  i = 0;
  for (const auto& b : module.buffers()) buffers_[i++].copy_(b.detach());
}

void Ema::require_whole(const char* what) const {
  if (!whole_) throw std::logic_error(std::string("Ema::") + what + ": the average is sharded; gather() it first");
}

void Ema::swap(torch::nn::Module& module) {
  require_whole("swap");
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& p : module.parameters()) {
    torch::Tensor mine = p.data();
    p.set_data(params_[i]);
    params_[i++] = mine;
  }
  i = 0;
  for (auto& b : module.buffers()) {
    torch::Tensor mine = b.data();
    b.set_data(buffers_[i]);
    buffers_[i++] = mine;
  }
}

std::vector<torch::Tensor> Ema::tensors() const {
  require_whole("tensors");
  std::vector<torch::Tensor> all = params_;
  all.insert(all.end(), buffers_.begin(), buffers_.end());
  return all;
}

std::vector<torch::Tensor> Ema::held() const {
  std::vector<torch::Tensor> out;
  for (const auto& t : params_)
    if (t.defined()) out.push_back(t);
  for (const auto& piece : sharding_.average) out.push_back(piece.flat);
  out.insert(out.end(), buffers_.begin(), buffers_.end());
  return out;
}

std::vector<torch::Tensor> Ema::layout() const { return layout_; }

void Ema::load_state(const std::vector<std::pair<std::string, torch::Tensor>>& stored) {
  std::map<std::string, torch::Tensor> by_name(stored.begin(), stored.end());
  for (size_t i = 0; i < layout_.size(); ++i) {
    auto it = by_name.find(names_[i]);
    if (it == by_name.end()) throw std::runtime_error("its EMA holds no '" + names_[i] + "'");
    // copy_ would broadcast a stored tensor of another shape into ours: refuse it instead.
    if (it->second.sizes() != layout_[i].sizes()) throw std::runtime_error("its EMA '" + names_[i] + "' has the wrong shape");
  }
  torch::NoGradGuard no_grad;
  release();
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].defined()) params_[i].copy_(by_name.at(names_[i]));
  for (size_t k = 0; k < sharding_.average.size(); ++k) {
    const ShardPiece& piece = sharding_.average[k];
    const auto& whole = by_name.at(names_[piece_param_[k]]);
    piece.flat.copy_(whole.reshape(-1).narrow(0, piece.offset, piece.flat.numel()));
  }
  for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(by_name.at(names_[params_.size() + i]));
}

void Ema::shard(torch::nn::Module& module, EmaSharding s) {
  torch::NoGradGuard no_grad;
  std::unordered_map<const void*, size_t> index;
  size_t i = 0;
  for (const auto& p : module.parameters()) {
    index[p.unsafeGetTensorImpl()] = i;
    if (p.requires_grad()) {
      sharded_params_.push_back(i);
      device_ = p.device();
    }
    ++i;
  }
  for (const auto& piece : s.average) {
    const size_t at = index.at(piece.param.unsafeGetTensorImpl());
    piece_param_.push_back(at);
    // From the weights themselves: compose() may have given every rank rank 0's since the
    // average was made.
    piece.flat.copy_(piece.param.detach().reshape(-1).narrow(0, piece.offset, piece.flat.numel()));
  }
  sharding_ = std::move(s);
  whole_ = true;
  release();
}

void Ema::gather() {
  if (whole_) return;
  std::vector<torch::Tensor> whole;
  for (size_t i : sharded_params_) {
    const auto& m = layout_[i];
    // In the parameter's own memory format (its strides): swap() puts it in the module.
    whole.push_back(at::empty_strided(m.sizes(), m.strides(), m.options().device(device_)));
  }
  sharding_.gather(whole);  // a failed collective leaves the average sharded, as it was
  for (size_t k = 0; k < sharded_params_.size(); ++k) params_[sharded_params_[k]] = whole[k];
  whole_ = true;
}

void Ema::release() {
  if (!whole_ || !sharded()) return;
  for (size_t i : sharded_params_) params_[i] = torch::Tensor();
  whole_ = false;
}

}  // namespace gputrain
