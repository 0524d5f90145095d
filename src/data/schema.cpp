// The sample schema: fields, their texts and their JSON.
#include "data/schema.h"

#include <fmt/format.h>

#include "core/text.h"
#include "data/dataset.h"

namespace gputrain {

const char* dtype_name(DType t) { return t == DType::kI64 ? "i64" : "f32"; }

std::string TensorField::text() const {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  std::string s = fmt::format("{}: {}[{}]", name, dtype_name(dtype), join(dims, ","));
  for (int64_t d : shape)
    if (d < 0) return s + fmt::format(" pad {:g}", pad);
  return s;
}

std::string SampleSchema::text() const {
  std::vector<std::string> parts;
  for (const auto& f : fields) parts.push_back(f.text());
  return join(parts, ", ");
}

nlohmann::json SampleSchema::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& f : fields) {
    out[f.name] = {{"dtype", dtype_name(f.dtype)}, {"shape", f.shape}};
    for (int64_t d : f.shape)
      if (d < 0) out[f.name]["pad"] = f.pad;
  }
  return out;
}

SampleSchema schema_of(const Dataset& data) {
  SampleSchema s;
  s.fields.push_back({"x", DType::kF32, data.sample_shape(), 0});
  if (data.is_regression())
    s.fields.push_back({"y", DType::kF32, data.target_shape(), 0});
  else
    s.fields.push_back({"y", DType::kI64, {}, 0});
  return s;
}

}  // namespace gputrain
