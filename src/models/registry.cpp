// The model registry: a name -> factory table.
#include "models/registry.h"

#include <functional>

#include "core/error.h"
#include "core/text.h"

namespace gputrain {
namespace {

struct Entry {
  const char* name;
  NetPtr (*make)(const ModelSpec&);
};
const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      {"mlp", make_mlp},
      {"cnn", make_cnn},
      {"resnet18", make_resnet18},
  };
  return t;
}

std::string join_shape(const std::vector<int64_t>& shape) {
  std::string s;
  for (auto d : shape) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s.empty() ? "()" : s;
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& e : table()) names.push_back(e.name);
  return names;
}

NetPtr make_model(const std::string& name, const ModelSpec& spec) {
  // Convolutional models need images; flat or sequence samples go to the mlp.
  if (name != "mlp" && spec.input_shape.size() != 3)
    throw usage_error("model '" + name + "' needs image samples (C x H x W), the data gives samples of shape " +
                          join_shape(spec.input_shape),
                      "use --model mlp for tables and sequences");
  for (const auto& e : table())
    if (name == e.name) return e.make(spec);
  throw usage_error("unknown model '" + name + "'" + did_you_mean(name, model_names()),
                    "models: " + join(model_names(), ", "));
}

int64_t parameter_count(const Net& net) {
  int64_t n = 0;
  for (const auto& p : net.parameters()) n += p.numel();
  return n;
}

}  // namespace gputrain
