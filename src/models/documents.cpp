// Packed examples (documents.h): positions and the block-diagonal causal mask.
#include "models/documents.h"

#include <torch/torch.h>

namespace gputrain {

Documents documents_of(const Batch& b, const torch::Tensor& ids) {
  const int64_t T = ids.size(1);
  if (!b.has("positions")) return {torch::arange(T, ids.options()).unsqueeze(0), {}};
  const auto& positions = b.at("positions");
  // Example k of a row is the tokens after its k-th restart: equal numbers, same example.
  const auto example = positions.eq(0).cumsum(1);
  const auto same = example.unsqueeze(2) == example.unsqueeze(1);
  const auto earlier = torch::ones({T, T}, ids.options().dtype(torch::kBool)).tril();
  return {positions, (same & earlier).unsqueeze(1)};
}

}  // namespace gputrain
