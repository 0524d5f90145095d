// Drawing a text from a language model (sample.h).
#include "text/sample.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/autocast.h"

namespace gputrain {

std::vector<int64_t> sample_tokens(Net& model, torch::Device device, const SampleOptions& o) {
  torch::NoGradGuard no_grad;
  model.eval();
  // The draw on the CPU with its own generator: the text does not depend on the device's
  // random state, and the run's own random streams are left as they were.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  std::vector<int64_t> ids{o.start}, drawn;
  for (int64_t i = 0; i < o.tokens; ++i) {
    const size_t keep = o.context > 0 ? std::min(ids.size(), static_cast<size_t>(o.context)) : ids.size();
    const auto input = torch::tensor(std::vector<int64_t>(ids.end() - static_cast<std::ptrdiff_t>(keep), ids.end()))
                           .unsqueeze(0)
                           .to(device);
    torch::Tensor last;
    {
      AutocastGuard autocast(o.precision.amp, device.type(), o.precision.dtype);
      last = model.forward(input).select(1, -1).to(torch::kFloat);  // [1, vocabulary]: the next id's logits
    }
    const auto probs = torch::softmax(last, -1).to(torch::kCPU);
    const int64_t next = at::multinomial(probs, 1, false, gen).item<int64_t>();
    ids.push_back(next);
    drawn.push_back(next);
  }
  model.train();
  return drawn;
}

}  // namespace gputrain
