#include "data/shift_labels.h"

#include <cstring>

#include "core/error.h"
#include "data/schema.h"

namespace gputrain {
namespace {

constexpr int64_t kNoLabel = -100;  // cross-entropy's ignore index: the last position is not trained

// Remembers where the base writes the target field, to shift it once the sample is written.
class TargetTap : public FieldWriter {
 public:
  TargetTap(FieldWriter& out, size_t target, int64_t fixed) : out_(out), target_(target), fixed_(fixed) {}
  void* field(size_t f, int64_t length) override {
    void* p = out_.field(f, length);
    if (f == target_) {
      labels_ = static_cast<int64_t*>(p);
      length_ = length > 0 ? length : fixed_;
    }
    return p;
  }
  void shift() const {
    if (!labels_ || length_ <= 0) return;
    std::memmove(labels_, labels_ + 1, static_cast<size_t>(length_ - 1) * sizeof(int64_t));
    labels_[length_ - 1] = kNoLabel;
  }

 private:
  FieldWriter& out_;
  size_t target_;
  int64_t fixed_;
  int64_t* labels_ = nullptr;
  int64_t length_ = 0;
};

class ShiftedLabels : public DatasetWrapper {
 public:
  ShiftedLabels(DatasetPtr base, size_t target, int64_t fixed) : DatasetWrapper(std::move(base)), target_(target), fixed_(fixed) {}
  void get_fields(int64_t index, FieldWriter& out, uint64_t seed) const override {
    TargetTap tap(out, target_, fixed_);
    base_->get_fields(index, tap, seed);
    tap.shift();
  }

 private:
  size_t target_;
  int64_t fixed_;
};

}  // namespace

DatasetPtr shift_labels(DatasetPtr base) {
  const auto schema = base->named_fields();
  const TensorField* t = schema ? schema->find(schema->target) : nullptr;
  if (!t || t->dtype != DType::kI64 || t->shape.size() != 1)
    throw usage_error("the model is a causal language model (its label at each position is the next token), and the data's "
                      "target " + (t ? "'" + t->text() + "'" : std::string("has no per-token field")) +
                          " is not a token id per position",
                      "give per-token labels (the input_ids, -100 where nothing is trained), e.g. --dataset jsonl with a "
                      "'labels' list");
  const size_t index = static_cast<size_t>(t - schema->fields.data());
  return std::make_shared<ShiftedLabels>(std::move(base), index, t->shape[0]);
}

}  // namespace gputrain
