// Batches of named fields: lookups and field-wise operations.
#include "data/batch.h"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gputrain {

Batch::Batch(torch::Tensor x, torch::Tensor y) : names{"x", "y"}, tensors{std::move(x), std::move(y)} {}

torch::Tensor& Batch::at(std::string_view name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return tensors[i];
  throw std::out_of_range(fmt::format("the batch has no field '{}'", name));
}

const torch::Tensor& Batch::at(std::string_view name) const { return const_cast<Batch*>(this)->at(name); }

bool Batch::has(std::string_view name) const {
  for (const auto& n : names)
    if (n == name) return true;
  return false;
}

Batch Batch::map(const std::function<torch::Tensor(const torch::Tensor&)>& f) const {
  Batch out;
  out.names = names;
  out.target = target;
  out.tensors.reserve(tensors.size());
  for (const auto& t : tensors) out.tensors.push_back(f(t));
  return out;
}

Batch Batch::narrow(int64_t start, int64_t length) const {
  return map([&](const torch::Tensor& t) { return t.narrow(0, start, length); });
}

std::vector<Batch> Batch::chunk(int64_t parts) const {
  std::vector<Batch> out;
  for (size_t f = 0; f < tensors.size(); ++f) {
    const auto pieces = tensors[f].chunk(parts);
    if (out.empty()) out.resize(pieces.size());
    for (auto& b : out) b.target = target;
    for (size_t i = 0; i < pieces.size() && i < out.size(); ++i) {
      out[i].names.push_back(names[f]);
      out[i].tensors.push_back(pieces[i]);
    }
  }
  return out;
}

bool Batch::same_layout(const Batch& other) const {
  if (names != other.names) return false;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].sizes() != other.tensors[i].sizes() || tensors[i].dtype() != other.tensors[i].dtype()) return false;
  return true;
}

std::string Batch::shape_text() const {
  std::string s;
  for (size_t i = 0; i < tensors.size(); ++i)
    s += fmt::format("{}{} {}", i ? ", " : "", names[i], fmt::join(tensors[i].sizes(), "x"));
  return s;
}

}  // namespace gputrain
