// --dataset jsonl: every line parsed once at load, each field kept as one flat column.
#include "data/jsonl_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"

namespace gputrain {
namespace {

constexpr const char* kHint =
    "write one JSON object per line, each with the same keys, of numbers or flat lists of numbers "
    "(e.g. {\"input_ids\": [5, 9], \"attention_mask\": [1, 1], \"labels\": [9, -100]})";

// A field as read: its values as doubles (exact for ids and labels) until its dtype is known.
struct Raw {
  std::string name;
  bool list = false, fraction = false;
  std::vector<double> values;
  std::vector<int64_t> start{0};
  int64_t shortest = INT64_MAX, longest = 0;
  std::string too_large;  // where a whole number beyond 2^53 first came: refused if the field is i64
};

}  // namespace

std::vector<int64_t> JsonlDataset::target_shape() const {
  if (classes_ > 0) return {};
  const TensorField& t = *schema_->find(schema_->target);
  return t.shape;
}

int64_t JsonlDataset::get(int64_t, float*, float*, uint64_t) const {
  throw std::logic_error("JsonlDataset::get: a dataset of named fields is read with get_fields");
}

void JsonlDataset::get_fields(int64_t index, FieldWriter& out, uint64_t) const {
  for (size_t f = 0; f < columns_.size(); ++f) {
    const Column& c = columns_[f];
    const int64_t begin = c.start[static_cast<size_t>(index)], end = c.start[static_cast<size_t>(index) + 1];
    const int64_t rows = schema_->fields[f].varies() ? end - begin : 0;
    void* dst = out.field(f, rows);
    if (schema_->fields[f].dtype == DType::kI64)
      std::memcpy(dst, c.ints.data() + begin, static_cast<size_t>(end - begin) * sizeof(int64_t));
    else
      std::memcpy(dst, c.floats.data() + begin, static_cast<size_t>(end - begin) * sizeof(float));
  }
}

std::shared_ptr<JsonlDataset> load_jsonl_dataset(const std::string& path, const std::string& target, int64_t classes,
                                                 JsonlDataset* train) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error(path + ": cannot be read (" + std::strerror(errno) + ")", "check --train_file / --test_file");
  std::vector<Raw> raw;
  std::string line;
  int64_t n = 0, number = 0;
  auto fail = [&](const std::string& what) { return usage_error(fmt::format("{} line {}: {}", path, number, what), kHint); };
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json j;  // the line's order is the fields' order
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::ordered_json::exception& e) {
      throw fail(std::string("not JSON (") + e.what() + ")");
    }
    if (!j.is_object() || j.empty()) throw fail("not a JSON object of fields");
    if (raw.empty())
      for (const auto& [key, value] : j.items()) raw.push_back({key, value.is_array()});
    if (j.size() != raw.size()) throw fail(fmt::format("{} fields, the first line has {}", j.size(), raw.size()));
    for (auto& r : raw) {
      const auto it = j.find(r.name);
      if (it == j.end()) throw fail("no field '" + r.name + "', which the first line has");
      if (it->is_array() != r.list) throw fail("'" + r.name + "' is " + (r.list ? "not a list" : "a list") + " here, " +
                                               (r.list ? "a list" : "a number") + " on the first line");
      auto take = [&](const nlohmann::ordered_json& v) {
        if (!v.is_number()) throw fail("'" + r.name + "' holds " + std::string(v.type_name()) + ", not a number");
        const double d = v.get<double>();
        if (!std::isfinite(d)) throw fail("'" + r.name + "' holds a value that is not finite");
        if (v.is_number_float()) r.fraction = true;
        // Whole numbers are kept as doubles until the dtype is known: exact up to 2^53, far
        // above any id or class (a larger one wrapped to a negative class in the message). A
        // field with fractions elsewhere is float32, where a large whole number is fine.
        else if (std::fabs(d) > 9007199254740992.0 && r.too_large.empty())
          r.too_large = fmt::format("line {}: '{}' holds {}", number, r.name, v.dump());
        r.values.push_back(d);
      };
      if (r.list) {
        for (const auto& v : *it) take(v);
        r.shortest = std::min<int64_t>(r.shortest, static_cast<int64_t>(it->size()));
        r.longest = std::max<int64_t>(r.longest, static_cast<int64_t>(it->size()));
      } else {
        take(*it);
      }
      r.start.push_back(static_cast<int64_t>(r.values.size()));
    }
    ++n;
  }
  if (n == 0) throw usage_error(path + ": holds no samples", kHint);
  // A sample's per-token fields go with its ids one for one: a mask shorter than its ids would
  // be padded with zeros, and most of the sample silently left out.
  const auto ids = std::find_if(raw.begin(), raw.end(), [](const Raw& r) { return r.name == "input_ids" && r.list; });
  if (ids != raw.end())
    for (const auto& r : raw) {
      const bool per_token = r.name == "attention_mask" || r.name == "token_type_ids" || r.name == "position_ids" ||
                             (r.name == (target.empty() ? "labels" : target) && r.shortest != r.longest);
      if (&r == &*ids || !r.list || !per_token) continue;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t want = ids->start[i + 1] - ids->start[i], got = r.start[i + 1] - r.start[i];
        if (got != want)
          throw usage_error(fmt::format("{}: sample {} has {} '{}' values and {} input_ids; they go one per token", path,
                                        i + 1, got, r.name, want),
                            kHint);
      }
    }

  auto data = std::shared_ptr<JsonlDataset>(new JsonlDataset());
  data->n_ = n;
  data->schema_ = std::make_shared<SampleSchema>();
  SampleSchema& schema = *data->schema_;
  if (!target.empty()) {
    schema.target = target;
  } else {
    schema.target.clear();
    for (const char* name : {"labels", "label", "y"})
      if (schema.target.empty() && std::any_of(raw.begin(), raw.end(), [&](const Raw& r) { return r.name == name; }))
        schema.target = name;
    if (schema.target.empty())
      throw usage_error(path + ": no target field (labels, label or y) among " + [&] {
        std::vector<std::string> names;
        for (const auto& r : raw) names.push_back(r.name);
        return join(names, ", ");
      }(), "name the target with --target FIELD");
  }
  for (auto& r : raw) {
    TensorField f{r.name, r.fraction ? DType::kF32 : DType::kI64, {}, 0};
    if (r.list) {
      f.shape = {r.shortest == r.longest ? r.longest : -1};
      f.longest = r.longest;
    }
    const bool is_target = r.name == schema.target;
    if (is_target && f.varies()) f.pad = -100;  // cross-entropy's ignore index: padding is not trained on
    JsonlDataset::Column c;
    c.start = std::move(r.start);
    if (f.dtype == DType::kI64 && !r.too_large.empty())
      throw usage_error(fmt::format("{} {}, too large for an id or a class", path, r.too_large), kHint);
    if (f.dtype == DType::kI64) {
      c.ints.assign(r.values.begin(), r.values.end());
      if (!c.ints.empty()) {
        f.largest = *std::max_element(c.ints.begin(), c.ints.end());
        f.smallest = *std::min_element(c.ints.begin(), c.ints.end());
      }
    }
    else c.floats.assign(r.values.begin(), r.values.end());
    if (is_target && f.dtype == DType::kI64) {
      int64_t top = -1;
      for (int64_t v : c.ints) {
        if (v < 0 && (v != -100 || !r.list))
          throw usage_error(fmt::format("{}: target '{}' holds {}; classes are 0 or more{}", path, r.name, v,
                                        r.list ? ", and -100 marks a position that is not trained on" : ""),
                            kHint);
        top = std::max(top, v);
      }
      const int64_t want = train ? train->num_classes() : classes;
      if (want > 0 && top >= want)
        throw usage_error(fmt::format("{}: target '{}' holds class {}, beyond the {} classes{}", path, r.name, top, want,
                                      train ? " of the training data" : " of --num_classes"),
                          train ? "the test data's classes must be among the training data's" : "raise --num_classes");
      data->classes_ = want > 0 ? want : top + 1;
      if (data->classes_ < 1) throw usage_error(path + ": target '" + r.name + "' holds no class (only -100)", kHint);
    } else if (is_target && f.varies()) {
      throw usage_error(path + ": target '" + r.name + "' holds numbers of varying count; a regression target has a fixed size",
                        kHint);
    }
    schema.fields.push_back(f);
    data->columns_.push_back(std::move(c));
  }
  if (!schema.find(schema.target))
    throw usage_error(path + ": no field '" + schema.target + "' (--target) among " + join(schema.names(), ", "), kHint);
  if (train) {
    SampleSchema& want = *train->schema_;
    for (size_t i = 0; i < std::max(want.fields.size(), schema.fields.size()); ++i) {
      const TensorField* a = i < want.fields.size() ? &want.fields[i] : nullptr;
      const TensorField* b = a ? schema.find(a->name) : nullptr;
      const bool fits = a && b && a->dtype == b->dtype && a->shape.size() == b->shape.size() &&
                        (a->varies() || b->varies() || a->shape == b->shape) &&
                        want.fields.size() == schema.fields.size();
      if (!fits)
        throw usage_error(fmt::format("{}: fields {} differ from the training data's {}", path, schema.text(), want.text()),
                          "give both splits the same fields, dtypes and fixed sizes");
    }
    // One layout for both splits, as the model is bound to it: a list that varies in either
    // varies in both, padded alike, up to the longer of their longest.
    for (auto& a : want.fields) {
      TensorField& b = *const_cast<TensorField*>(schema.find(a.name));
      a.largest = b.largest = std::max(a.largest, b.largest);  // ids: checked against the model's embedding
      a.smallest = b.smallest = std::min(a.smallest, b.smallest);
      if (a.varies() || b.varies()) {
        a.shape.front() = b.shape.front() = -1;
        a.pad = b.pad = a.name == want.target ? -100 : 0;
        a.longest = b.longest = std::max(a.longest, b.longest);
      }
    }
  }
  return data;
}

}  // namespace gputrain
