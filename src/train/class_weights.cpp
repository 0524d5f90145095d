// --class_weights (class_weights.h).
#include "train/class_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/text.h"
#include "data/schema.h"

namespace gputrain {
namespace {

// Writes a named-field sample into scratch buffers, keeping the target field's values.
class TargetReader : public FieldWriter {
 public:
  TargetReader(const SampleSchema& schema, size_t target) : schema_(schema), target_(target), buffers_(schema.fields.size()) {}
  void* field(size_t f, int64_t length) override {
    const TensorField& t = schema_.fields[f];
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d < 0 ? length : d;
    buffers_[f].resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
    return buffers_[f].data();
  }
  // Every value is 8 bytes here (int64_t or a float in the first 4).
  const std::vector<int64_t>& target() const { return buffers_[target_]; }

 private:
  const SampleSchema& schema_;
  size_t target_;
  std::vector<std::vector<int64_t>> buffers_;
};

// Per class: samples of that class; multi-label: samples with that label on.
std::vector<double> label_counts(const Dataset& data) {
  const int64_t classes = data.num_classes();
  std::vector<double> counts(static_cast<size_t>(classes), 0);
  const auto schema = data.named_fields();
  if (!schema) {
    std::vector<float> x(static_cast<size_t>(data.sample_numel())), y(1);
    for (int64_t i = 0; i < data.size(); ++i) {
      const int64_t c = data.get(i, x.data(), y.data(), 0);
      if (c >= 0 && c < classes) counts[static_cast<size_t>(c)] += 1;
    }
    return counts;
  }
  size_t target = 0;
  while (schema->fields[target].name != schema->target) ++target;
  const bool floats = schema->fields[target].dtype == DType::kF32;
  TargetReader reader(*schema, target);
  for (int64_t i = 0; i < data.size(); ++i) {
    data.get_fields(i, reader, 0);
    const auto& t = reader.target();
    if (floats) {  // multi-label: one float per label
      const auto* v = reinterpret_cast<const float*>(t.data());
      for (int64_t k = 0; k < classes; ++k) counts[static_cast<size_t>(k)] += v[k] == 1.0f;
    } else if (t[0] >= 0 && t[0] < classes) {
      counts[static_cast<size_t>(t[0])] += 1;
    }
  }
  return counts;
}

}  // namespace

torch::Tensor class_weights(const std::string& flag, const Dataset& train) {
  if (flag.empty()) return {};
  const std::string hint = "--class_weights balanced, or one weight per class: --class_weights 1,4.5";
  if (train.is_regression()) throw usage_error("--class_weights weighs classes; this data is regression", "drop it");
  if (const auto schema = train.named_fields(); schema && !train.multilabel() && !schema->find(schema->target)->shape.empty())
    throw usage_error("--class_weights weighs a label per sample; this data has a label per token", "drop it");
  const int64_t classes = train.num_classes();
  std::vector<float> weights;
  if (flag == "balanced") {
    const auto counts = label_counts(train);
    const double n = static_cast<double>(train.size());
    for (int64_t c = 0; c < classes; ++c) {
      const double count = counts[static_cast<size_t>(c)];
      if (count == 0 || (train.multilabel() && count == n))
        throw usage_error(fmt::format("--class_weights balanced: {} {} of the training data's {} samples{}", train.multilabel() ? "label" : "class",
                                      c, static_cast<int64_t>(n), count == 0 ? " has none" : " are all on"),
                          "give the weights: " + hint);
      weights.push_back(static_cast<float>(train.multilabel() ? (n - count) / count : n / (static_cast<double>(classes) * count)));
    }
  } else {
    for (const auto& item : split_list(flag, ListItems::kTrimmed)) {
      char* end = nullptr;
      const double w = std::strtod(item.c_str(), &end);
      if (end != item.c_str() + item.size() || !(w > 0) || w > 1e6)
        throw usage_error(fmt::format("--class_weights '{}': '{}' is not a positive weight", flag, item), hint);
      weights.push_back(static_cast<float>(w));
    }
    if (static_cast<int64_t>(weights.size()) != classes)
      throw usage_error(fmt::format("--class_weights gives {} weights; the data has {} {}", weights.size(), classes,
                                    train.multilabel() ? "labels" : "classes"),
                        hint);
  }
  return torch::tensor(weights);
}

}  // namespace gputrain
