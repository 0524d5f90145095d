// A batch: the sample schema's fields (data/schema.h), each [B, ...], on one device. The device
// copy, CUDA graphs, the out-of-memory split, accumulation, data parallel, the AMP check,
// evaluation and inference carry it whole, whatever its fields. Image, table and series formats
// give two: "x", the model's input, and "y", the target (a class index, or regression values).
// Named-field data (--dataset jsonl) gives its own (input_ids, attention_mask, labels, and the
// padding's length); models taking named inputs bind them by name (Net::forward_batch), and the
// loss reads the target field, y() (pipeline stages take x and y alone).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <torch/types.h>

namespace gputrain {

struct Batch {
  std::vector<std::string> names;      // the fields, in the schema's order
  std::vector<torch::Tensor> tensors;  // one per name, each [B, ...]
  std::string target = "y";            // the field the loss trains against

  Batch() = default;
  Batch(torch::Tensor x, torch::Tensor y);  // the two fields every format gives

  // The field `name`; a batch without it is a logic error (std::out_of_range naming it).
  torch::Tensor& at(std::string_view name);
  const torch::Tensor& at(std::string_view name) const;
  bool has(std::string_view name) const;
  torch::Tensor& x() { return at("x"); }
  const torch::Tensor& x() const { return at("x"); }
  torch::Tensor& y() { return at(target); }
  const torch::Tensor& y() const { return at(target); }

  int64_t samples() const { return tensors.empty() ? 0 : tensors.front().size(0); }
  // The same fields, each through `f` (a copy to a device, a clone, a layout).
  Batch map(const std::function<torch::Tensor(const torch::Tensor&)>& f) const;
  // Rows [start, start + length) of every field.
  Batch narrow(int64_t start, int64_t length) const;
  // Every field cut into `parts` pieces along the batch, as torch::chunk cuts one.
  std::vector<Batch> chunk(int64_t parts) const;
  // Same names, sizes and dtypes: what a captured CUDA graph's batch must keep.
  bool same_layout(const Batch& other) const;
  // "x 32x1x28x28, y 32": the sizes of every field, for messages.
  std::string shape_text() const;
};

}  // namespace gputrain
