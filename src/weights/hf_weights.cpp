#include "weights/hf_weights.h"

#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "weights/hf_gpt2.h"
#include "weights/torch_save.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

constexpr const char* kHint =
    "give a folder that save_pretrained wrote (config.json, and model.safetensors or its sharded index)";

}  // namespace

NamedTensors read_hf_weights(const std::string& dir) {
  const fs::path folder(dir);
  NamedTensors file;
  if (fs::exists(folder / "model.safetensors")) {
    for (auto& [name, t] : load_safetensors((folder / "model.safetensors").string())) file.emplace_back(name, t);
  } else if (fs::exists(folder / "model.safetensors.index.json")) {
    const std::string index = (folder / "model.safetensors.index.json").string();
    const nlohmann::json j = read_hf_json(index, kHint);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw usage_error("'" + index + "' has no weight_map", kHint);
    std::map<std::string, std::string> where;
    for (const auto& [name, f] : j["weight_map"].items()) {
      const std::string shard = f.is_string() ? f.get<std::string>() : "";
      // A shard is a file beside the index: no folder, no way out of it.
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        throw usage_error(fmt::format("'{}': tensor '{}' is in '{}', not a file beside it", index, name, shard), kHint);
      where[name] = shard;
    }
    std::set<std::string> shards;
    for (const auto& [name, shard] : where) shards.insert(shard);
    for (const auto& shard : shards)
      for (auto& [name, t] : load_safetensors((folder / shard).string())) {
        const auto it = where.find(name);
        if (it == where.end() || it->second != shard)
          throw usage_error(fmt::format("'{}': '{}' holds '{}', which the index places elsewhere", index, shard, name), kHint);
        file.emplace_back(name, t);
      }
    if (file.size() != where.size())
      throw usage_error(fmt::format("'{}' names {} tensors; its files hold {}", index, where.size(), file.size()), kHint);
  } else if (fs::exists(folder / "pytorch_model.bin")) {
    file = read_torch_save((folder / "pytorch_model.bin").string(), false).tensors;
  } else {
    throw usage_error("'" + folder.string() + "' holds no model.safetensors, model.safetensors.index.json or pytorch_model.bin",
                      kHint);
  }
  return file;
}

}  // namespace gputrain
