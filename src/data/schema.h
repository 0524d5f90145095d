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
  std::string text() const;    // "x: f32[1,28,28]", "labels: i64[-1] pad -100"
};

struct SampleSchema {
  std::vector<TensorField> fields;
  std::string text() const;        // the fields' texts joined by ", "
  nlohmann::json to_json() const;  // {"x": {"dtype": "f32", "shape": [1, 28, 28]}, ...}
};

// "f32", "i64".
const char* dtype_name(DType t);

// The schema of `data`: x, the sample; y, its class or its regression target.
SampleSchema schema_of(const Dataset& data);

}  // namespace gputrain
