// A model's forward as consecutive pieces: what pipeline stages cut, place and run. The model
// families declare them (models/); parallel/ sees only this, never a model.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace gputrain {

struct Piece {
  std::string name;  // "fc1", "layer2.1": for the log
  std::function<torch::Tensor(torch::Tensor)> run;
  std::vector<torch::Tensor> tensors;  // the parameters and buffers it uses (placement)
  // Elements of its parameters, frozen ones included (a fine-tune unfreezes them later): the
  // size by which stages are cut.
  int64_t parameters = 0;
};
using Pieces = std::vector<Piece>;

// Pieces [begin, end) on x. Where stages put pieces on several devices, x follows them.
torch::Tensor run_pieces(const Pieces& pieces, torch::Tensor x, size_t begin, size_t end);

// Moves pieces [begin, end) (their parameters and buffers) to `device`.
void place_pieces(const Pieces& pieces, size_t begin, size_t end, const torch::Device& device);

}  // namespace gputrain
