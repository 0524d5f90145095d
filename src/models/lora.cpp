// LoRA adapters on the language models' projections (lora.h).
#include "models/lora.h"

#include <cmath>
#include <map>
#include <stdexcept>

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/torch.h>

namespace gputrain {

namespace {
const std::string kA = ".lora_A", kB = ".lora_B";

// oneDNN's linear through the dispatcher (the ops torch.compile's CPU freezing calls; their
// kernels' C++ signatures).
torch::Tensor pack_weight(const torch::Tensor& weight, int64_t rows) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("mkldnn::_reorder_linear_weight", "")
                             .typed<at::Tensor(const at::Tensor&, std::optional<int64_t>)>();
  return op.call(weight, rows);
}

torch::Tensor packed_linear(const torch::Tensor& x, const torch::Tensor& packed, const torch::Tensor& bias) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mkldnn::_linear_pointwise", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, c10::string_view,
                            torch::List<std::optional<at::Scalar>>, std::optional<c10::string_view>)>();
  return op.call(x, packed, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, "none",
                 torch::List<std::optional<at::Scalar>>(), "");
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

ProjectionImpl::ProjectionImpl(int64_t in, int64_t out, bool with_bias, bool lora) : lora_target(lora) {
  // nn.Linear's initialisation; the model families then set their own.
  weight = register_parameter("weight", torch::empty({out, in}));
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (with_bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    bias = register_parameter("bias", torch::empty({out}).uniform_(-bound, bound));
  }
}

torch::Tensor ProjectionImpl::forward(const torch::Tensor& x) {
  // at::linear, the op Python's F.linear calls: on [B, T, in] it is one addmm over the B x T
  // rows with the bias as its addend. The C++ frontend's functional::linear does a matmul and then
  // adds the bias in a second pass over the output (and sums its gradient in another).
  auto y = packed.defined() && x.scalar_type() == weight.scalar_type() ? packed_linear(x, packed, bias)
                                                                       : at::linear(x, weight, bias);
  if (lora_A.defined())
    y = y + torch::nn::functional::linear(torch::nn::functional::linear(x, lora_A), lora_B) * lora_scale;
  return y;
}

void ProjectionImpl::add_lora(int64_t rank, double scale) {
  torch::NoGradGuard no_grad;
  const auto options = weight.options();
  lora_A = register_parameter("lora_A", torch::empty({rank, weight.size(1)}, options));
  torch::nn::init::kaiming_uniform_(lora_A, std::sqrt(5.0));
  lora_B = register_parameter("lora_B", torch::zeros({weight.size(0), rank}, options));
  lora_scale = scale;
}

std::vector<std::string> add_lora(torch::nn::Module& model, int64_t rank, double alpha) {
  int64_t adapted = 0;
  for (const auto& m : model.modules(/*include_self=*/false))
    if (auto* p = dynamic_cast<ProjectionImpl*>(m.get()); p && p->lora_target) {
      p->add_lora(rank, alpha / static_cast<double>(rank));
      ++adapted;
    }
  if (adapted == 0) throw std::logic_error("add_lora: the model has no projection to adapt");
  std::vector<std::string> frozen;
  for (const auto& p : model.named_parameters())
    if (!is_lora_parameter(p.key())) frozen.push_back(p.key());
  return frozen;
}

int64_t pack_for_decoding(torch::nn::Module& model, int64_t rows) {
  if (!at::hasMKLDNN()) return 0;
  int64_t packed = 0;
  torch::NoGradGuard no_grad;
  for (const auto& m : model.modules(/*include_self=*/false))
    if (auto* p = dynamic_cast<ProjectionImpl*>(m.get())) {
      const auto dtype = p->weight.scalar_type();
      if (!p->weight.device().is_cpu() || (dtype != torch::kFloat && dtype != torch::kBFloat16)) continue;
      try {
        p->packed = pack_weight(p->weight, rows);
        ++packed;
      } catch (const c10::Error&) {  // a build or CPU without the kernel: the plain product
        return packed;
      }
    }
  return packed;
}

void unpack_after_decoding(torch::nn::Module& model) {
  for (const auto& m : model.modules(/*include_self=*/false))
    if (auto* p = dynamic_cast<ProjectionImpl*>(m.get())) p->packed = torch::Tensor();
}

bool is_lora_parameter(const std::string& name) { return ends_with(name, kA) || ends_with(name, kB); }

int64_t merge_lora(std::vector<std::pair<std::string, torch::Tensor>>& tensors, double scale) {
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < tensors.size(); ++i) at[tensors[i].first] = i;
  int64_t merged = 0;
  torch::NoGradGuard no_grad;
  for (const auto& [name, i] : at) {
    if (!ends_with(name, kA)) continue;
    const std::string stem = name.substr(0, name.size() - kA.size());
    const auto b = at.find(stem + kB), w = at.find(stem + ".weight");
    if (b == at.end() || w == at.end()) throw std::invalid_argument("merge_lora: " + name + " has no lora_B or weight beside it");
    auto& weight = tensors[w->second].second;
    const auto update = torch::matmul(tensors[b->second].second.to(torch::kFloat), tensors[i].second.to(torch::kFloat));
    weight = (weight.to(torch::kFloat) + update * scale).to(weight.scalar_type());
    ++merged;
  }
  std::erase_if(tensors, [](const auto& t) { return is_lora_parameter(t.first); });
  return merged;
}

}  // namespace gputrain
