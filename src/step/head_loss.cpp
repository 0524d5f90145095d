// The head fused with a per-token cross-entropy, a chunk of tokens at a time (head_loss.h).
#include "step/head_loss.h"

#include <algorithm>
#include <stdexcept>

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/autograd.h>

namespace gputrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The dtype the head's matrix product runs in: autocast's, when it is on for the device (as
// linear would run under it), else the hidden states'.
at::ScalarType compute_dtype(const torch::Tensor& hidden) {
  const auto device = hidden.device().type();
  return at::autocast::is_autocast_enabled(device) ? at::autocast::get_autocast_dtype(device) : hidden.scalar_type();
}

int64_t chunk_rows(int64_t classes, int64_t chunk_elements) {
  return std::max<int64_t>(1, chunk_elements / std::max<int64_t>(classes, 1));
}

// One chunk's summed loss and, when asked, the gradient of that sum with respect to its logits:
// softmax - ((1 - e) one-hot + e / V) on counted rows, zero on the rest (as cross_entropy with
// label_smoothing e and ignore_index computes them).
torch::Tensor chunk_loss(const torch::Tensor& logits, const torch::Tensor& y, double smoothing, torch::Tensor* grad) {
  const auto counted = y.ne(kIgnoreIndex);
  const auto target = y.masked_fill(counted.logical_not(), 0).unsqueeze(1);
  const auto lse = logits.logsumexp(1);
  auto rows = lse - logits.gather(1, target).squeeze(1);  // -log p(target)
  if (smoothing > 0) rows = (1 - smoothing) * rows + smoothing * (lse - logits.mean(1));  // mean of -log p over classes
  if (grad) {
    auto g = (logits - lse.unsqueeze(1)).exp_();  // the softmax
    g.scatter_add_(1, target, torch::full_like(target, -(1 - smoothing), g.options()));
    if (smoothing > 0) g.sub_(smoothing / static_cast<double>(logits.size(1)));
    *grad = g.mul_(counted.unsqueeze(1));
  }
  return rows.masked_fill(counted.logical_not(), 0).sum();
}

// The summed loss; the forward computes the gradients too, so no chunk's logits outlive it.
class HeadCrossEntropy : public torch::autograd::Function<HeadCrossEntropy> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& y, double smoothing, int64_t chunk_elements) {
    const auto dtype = compute_dtype(hidden);
    // fp16's range would flush a chunk's small probabilities to zero before the grad scaler's
    // scale reaches them (that comes in backward): its gradient products run in float32.
    const auto grad_dtype = dtype == torch::kHalf ? torch::kFloat : dtype;
    const bool need_h = hidden.requires_grad(), need_w = weight.requires_grad();  // a frozen head: no [V, d] product
    // The casts below are autocast's, made once; no op in here is cast again.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const int64_t d = hidden.size(-1), classes = weight.size(0);
    const auto h = hidden.reshape({-1, d}).to(dtype);
    const auto w = weight.to(dtype);
    const auto labels = y.reshape(-1);
    const int64_t n = h.size(0), step = chunk_rows(classes, chunk_elements);
    auto total = torch::zeros({}, hidden.options().dtype(torch::kFloat));
    const auto wg = w.to(grad_dtype);
    torch::Tensor grad_h = need_h ? torch::empty({n, d}, hidden.options()) : torch::Tensor();
    torch::Tensor grad_w = need_w ? torch::zeros(weight.sizes(), weight.options().dtype(torch::kFloat)) : torch::Tensor();
    for (int64_t start = 0; start < n; start += step) {
      const int64_t rows = std::min(step, n - start);
      const auto hc = h.narrow(0, start, rows);
      torch::Tensor g;
      total += chunk_loss(torch::mm(hc, w.t()).to(torch::kFloat), labels.narrow(0, start, rows), smoothing, &g);
      const auto gc = g.to(grad_dtype);
      if (need_h) grad_h.narrow(0, start, rows).copy_(torch::mm(gc, wg));
      if (need_w) grad_w.add_(torch::mm(gc.t(), hc.to(grad_dtype)));
    }
    if (need_h) ctx->saved_data["grad_hidden"] = grad_h.view(hidden.sizes());
    if (need_w) ctx->saved_data["grad_weight"] = grad_w.to(weight.scalar_type());
    return total;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    // The gradients were computed in the forward, as constants: they have no graph of their own.
    if (torch::GradMode::is_enabled())
      throw std::runtime_error("the fused head loss has no second derivative (create_graph); train with "
                               "--no-fused_head_loss");
    const auto scale = grad_out[0];  // d(loss backward starts from) / d(this sum): the weighting, the scaler's scale
    auto scaled = [&](const char* name) {
      const auto it = ctx->saved_data.find(name);
      if (it == ctx->saved_data.end()) return torch::Tensor();  // an input that needs no gradient
      const auto g = it->second.toTensor();
      return g * scale.to(g.scalar_type());
    };
    return {scaled("grad_hidden"), scaled("grad_weight"), {}, {}, {}};
  }
};

}  // namespace

ForwardOutput forward_for_loss(Net& model, const Batch& b, bool fuse_head) {
  if (fuse_head)
    if (auto head = model.forward_head(b); head.defined()) return {{}, std::move(head)};
  return {model.forward_batch(b), {}};
}

void for_each_logits_chunk(const HeadInput& head, const torch::Tensor& y,
                           const std::function<void(const torch::Tensor& logits, const torch::Tensor& y)>& each,
                           int64_t chunk_elements) {
  const auto h = head.hidden.reshape({-1, head.hidden.size(-1)});
  const auto labels = y.reshape(-1);
  const int64_t n = h.size(0), step = chunk_rows(head.weight.size(0), chunk_elements);
  for (int64_t start = 0; start < n; start += step) {
    const int64_t rows = std::min(step, n - start);
    // [1, rows, classes] and [1, rows]: one sample of those tokens, a class per token.
    each(torch::nn::functional::linear(h.narrow(0, start, rows), head.weight).to(torch::kFloat).unsqueeze(0),
         labels.narrow(0, start, rows).unsqueeze(0));
  }
}

torch::Tensor head_cross_entropy(const HeadInput& head, const torch::Tensor& y, double label_smoothing,
                                 int64_t chunk_elements) {
  if (torch::GradMode::is_enabled() && (head.hidden.requires_grad() || head.weight.requires_grad()))
    return HeadCrossEntropy::apply(head.hidden, head.weight, y, label_smoothing, chunk_elements);
  // No gradient wanted: the same chunks and formula, without the gradient's products.
  auto total = torch::zeros({}, head.hidden.options().dtype(torch::kFloat));
  for_each_logits_chunk(
      head, y,
      [&](const torch::Tensor& logits, const torch::Tensor& yc) {
        total += chunk_loss(logits[0], yc[0], label_smoothing, /*grad=*/nullptr);
      },
      chunk_elements);
  return total;
}

torch::Tensor output_loss(const ForwardOutput& o, const torch::Tensor& y, const LossSpec& spec, bool sum) {
  if (!o.head.defined()) return task_loss(o.out, y, spec, sum);
  const auto total = head_cross_entropy(o.head, y, spec.label_smoothing);
  return sum ? total : total / counted_tokens(y).clamp_min(1).to(total.device());
}

}  // namespace gputrain
