// Running and placing a model's pieces (core/pieces.h).
#include "core/pieces.h"

#include <torch/torch.h>

namespace gputrain {

torch::Tensor run_pieces(const Pieces& pieces, torch::Tensor x, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const auto& p = pieces[i];
    // Parameters change device in place (set_data), so the handles kept here follow them.
    if (!p.tensors.empty() && x.device() != p.tensors.front().device()) x = x.to(p.tensors.front().device());
    x = p.run(x);
  }
  return x;
}

void place_pieces(const Pieces& pieces, size_t begin, size_t end, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  for (size_t i = begin; i < end; ++i)
    for (auto t : pieces[i].tensors)
      if (t.device() != device) t.set_data(t.data().to(device));
}

}  // namespace gputrain
