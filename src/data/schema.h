// What one sample is, and so what a batch carries: named fields, each with a dtype and a shape
// (-1 for a size that varies from sample to sample, padded per batch with `pad`). Every dataset
// has one; the run's record keeps it (config.json and every checkpoint, "schema") and `train`
// prints it. Today every format gives {"x": f32[sample shape], "y": i64[] (a class) or
// f32[target shape] (regression)}; text-shaped data (ids, masks, per-token labels) adds
// fields of its own (docs/ARCHITECTURE.md, "The batch schema").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gputrain {

class Dataset;

enum class DType { kF32, kI64 };

struct TensorField {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // one sample's; -1 where the size varies (padded per batch)
  double pad = 0;              // the padding value of a varying size (a label field: -100, ignored)
  int64_t longest = 0;         // a varying size's largest value in the data (0: unknown), for models' limits
  int64_t largest = -1;        // an i64 field's largest value (token ids), -1 unknown: against a model's embedding rows
  int64_t smallest = 0;        // its smallest (0 when unknown): a negative id would index before the embedding's rows
  bool varies() const { return !shape.empty() && shape.front() < 0; }
  std::string text() const;    // "x: f32[1,28,28]", "labels: i64[-1] pad -100"
};

struct SampleSchema {
  std::vector<TensorField> fields;
  // The field the loss trains against: "y", or a named dataset's own ("labels").
  std::string target = "y";
  std::string text() const;        // the fields' texts joined by ", "; the target marked when not y
  nlohmann::json to_json() const;  // {"x": {"dtype": "f32", "shape": [1, 28, 28]}, ...}
  const TensorField* find(const std::string& name) const;  // null when there is no such field
  bool varies() const;  // a field of varying size: batches are padded to their longest sample
  std::vector<std::string> names() const;
};

// The field a padded batch adds: each sample's unpadded size along its varying fields.
inline constexpr const char* kLengthField = "length";

// "f32", "i64".
const char* dtype_name(DType t);

// The schema of `data`: its named fields (Dataset::named_fields), with the padding collate's
// "length" after them when a field varies; else x, the sample, and y, its class or its
// regression target.
SampleSchema schema_of(const Dataset& data);

}  // namespace gputrain
