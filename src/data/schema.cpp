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
  for (const auto& f : fields) parts.push_back(f.text() + (f.name == target && target != "y" ? " (target)" : ""));
  return join(parts, ", ");
}

const TensorField* SampleSchema::find(const std::string& name) const {
  for (const auto& f : fields)
    if (f.name == name) return &f;
  return nullptr;
}

bool SampleSchema::varies() const {
  for (const auto& f : fields)
    if (f.varies()) return true;
  return false;
}

std::vector<std::string> SampleSchema::names() const {
  std::vector<std::string> out;
  for (const auto& f : fields) out.push_back(f.name);
  return out;
}

nlohmann::json SampleSchema::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& f : fields) {
    out[f.name] = {{"dtype", dtype_name(f.dtype)}, {"shape", f.shape}};
    for (int64_t d : f.shape)
      if (d < 0) out[f.name]["pad"] = f.pad;
    if (f.name == target && target != "y") out[f.name]["target"] = true;
  }
  return out;
}

SampleSchema schema_of(const Dataset& data) {
  if (const auto named = data.named_fields()) {
    SampleSchema s = *named;
    if (s.varies() && !s.find(kLengthField)) s.fields.push_back({kLengthField, DType::kI64, {}, 0});
    return s;
  }
  SampleSchema s;
  s.fields.push_back({"x", DType::kF32, data.sample_shape(), 0});
  if (data.is_regression())
    s.fields.push_back({"y", DType::kF32, data.target_shape(), 0});
  else
    s.fields.push_back({"y", DType::kI64, {}, 0});
  return s;
}

}  // namespace gputrain
