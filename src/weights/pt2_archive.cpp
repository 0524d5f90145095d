// Reading a PT2 archive: the zip's directory, the one program's JSON, and each weight's bytes
// checked against its tensor meta (dtype, sizes, strides, offset) before a tensor is made.
#include "weights/pt2_archive.h"

#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/zip.h"
#include "weights/export_schema.h"

namespace gputrain {

const char* const kPt2Hint =
    "--model takes a torch.export.save archive of a program exported for training (tools/export_model.py writes one)";

namespace {

// Elements a strided view reaches: offset + sum((size - 1) * stride) + 1; nullopt on overflow, a
// negative size or a negative stride.
std::optional<int64_t> extent(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset) {
  int64_t last = offset;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < 0) return std::nullopt;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    int64_t step = 0;
    if (strides[i] < 0 || __builtin_mul_overflow(sizes[i] - 1, strides[i], &step) ||
        __builtin_add_overflow(last, step, &last))
      return std::nullopt;
  }
  return last + 1;
}

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)), m_(map_file(path_)) {
    for (auto& z : zip_directory(path_, m_, kPt2Hint)) members_[z.name] = z;
  }

  Pt2Archive read() {
    Pt2Archive a;
    a.path = path_;
    // One program: <root>/models/<name>.json (torch.export.save names it "model").
    std::string root, name;
    for (const auto& [member, z] : members_) {
      const auto at = member.find("/models/");
      if (at == std::string::npos || member.size() < 5 || member.compare(member.size() - 5, 5, ".json") != 0 ||
          member.find('/', at + 8) != std::string::npos)
        continue;
      if (!name.empty())
        throw usage_error(path_ + ": holds several programs (" + root + "models/" + name + ".json, " + member +
                              "); gputrain trains one",
                          kPt2Hint);
      root = member.substr(0, at + 1);
      name = member.substr(at + 8, member.size() - at - 8 - 5);
    }
    if (name.empty()) throw usage_error(path_ + ": no models/<name>.json in the archive: not a PT2 archive", kPt2Hint);
    const std::string program_member = root + "models/" + name + ".json";
    a.program = json(program_member);
    try {
      const auto& v = a.program.at("schema_version");
      const int major = v.at("major").get<int>();
      if (major != kPt2SchemaMajor)
        throw usage_error(fmt::format("{}: export schema version {}.{}; gputrain reads version {}.x", path_, major,
                                      v.at("minor").get<int>(), kPt2SchemaMajor),
                          "export it again with a torch whose torch.export writes schema 8 (2.5 or later)");
      a.weights = tensors(root + "data/weights/", name + "_weights_config.json", &a.tied);
      a.constants = tensors(root + "data/constants/", name + "_constants_config.json", nullptr);
      if (members_.count(root + "extra/gputrain.json")) {
        a.gputrain = json(root + "extra/gputrain.json");
        if (!a.gputrain.is_object()) throw usage_error(path_ + ": extra/gputrain.json is not a JSON object", kPt2Hint);
      }
    } catch (const nlohmann::json::exception& e) {
      throw usage_error(path_ + ": " + program_member + ": malformed (" + e.what() + ")", kPt2Hint);
    }
    return a;
  }

 private:
  const ZipMember& member(const std::string& name) const {
    const auto it = members_.find(name);
    if (it == members_.end()) throw usage_error(path_ + ": " + name + " is missing from the archive", kPt2Hint);
    return it->second;
  }

  std::pair<const uint8_t*, uint64_t> bytes(const std::string& name) const {
    return zip_stored_bytes(path_ + ": " + name, m_, member(name), kPt2Hint);
  }

  nlohmann::json json(const std::string& name) const {
    const auto [data, size] = bytes(name);
    // A program's JSON nests a few levels (a node's argument lists at most ~8); deeper input is
    // refused while it is read, before anything recurses over it.
    constexpr int kMaxDepth = 64;
    const nlohmann::json::parser_callback_t shallow = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > kMaxDepth)
        throw usage_error(fmt::format("{}: {}: JSON nested deeper than {} levels", path_, name, kMaxDepth), kPt2Hint);
      return true;
    };
    try {
      return nlohmann::json::parse(data, data + size, shallow);
    } catch (const nlohmann::json::exception& e) {
      throw usage_error(path_ + ": " + name + ": malformed JSON (" + e.what() + ")", kPt2Hint);
    }
  }

  // The tensors a config describes: {"config": {name: {path_name, use_pickle, tensor_meta}}}.
  // An archive without the config (no constants) holds none. Names on one stored tensor with one
  // tensor_meta are one tensor: into `tied` as (name, the first name) when given (weights), else
  // each its own copy (constants).
  std::vector<std::pair<std::string, torch::Tensor>> tensors(const std::string& folder, const std::string& config,
                                                             std::vector<std::pair<std::string, std::string>>* tied) {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    if (!members_.count(folder + config)) return out;
    const auto doc = json(folder + config);
    // path_name -> the first name stored there and its tensor_meta
    std::map<std::string, std::pair<std::string, nlohmann::json>> stored;
    for (const auto& [key, entry] : doc.at("config").items()) {
      const std::string where = path_ + ": " + key;
      if (entry.value("use_pickle", false))
        throw usage_error(where + ": a pickled tensor (gputrain reads raw tensor data only)",
                          "export it again with the venv's torch (torch.export.save stores weights raw)");
      const auto& meta = entry.at("tensor_meta");
      const auto dtype = export_scalar_type(meta.at("dtype").get<int64_t>());
      if (!dtype) throw usage_error(fmt::format("{}: dtype {} is not one gputrain reads", where, meta.at("dtype").dump()), kPt2Hint);
      if (meta.value("layout", 7) != 7) throw usage_error(where + ": not a strided (dense) tensor", kPt2Hint);
      auto ints = [&](const nlohmann::json& list) {
        std::vector<int64_t> v;
        for (const auto& x : list) v.push_back(x.at("as_int").get<int64_t>());
        return v;
      };
      const auto sizes = ints(meta.at("sizes")), strides = ints(meta.at("strides"));
      const int64_t offset = meta.at("storage_offset").at("as_int").get<int64_t>();
      // Two names on one stored tensor are tied weights (out.weight = emb.weight): one tensor
      // under two names. Two different views of one storage are not a module's parameters.
      const std::string stored_at = entry.at("path_name").get<std::string>();
      if (auto [it, added] = stored.emplace(stored_at, std::pair{key, meta}); !added) {
        if (it->second.second != meta)
          throw usage_error(where + ": another view of the tensor stored for '" + it->second.first + "'", kPt2Hint);
        if (tied) {
          tied->emplace_back(key, it->second.first);
          continue;
        }
      }
      const auto [data, size] = bytes(folder + stored_at);
      const int64_t item = static_cast<int64_t>(c10::elementSize(*dtype));
      const auto need = sizes.size() == strides.size() && offset >= 0 ? extent(sizes, strides, offset) : std::nullopt;
      // A tensor has no more values than its bytes hold either: a zero stride cannot make a
      // small file fill memory.
      int64_t numel = 1;
      for (auto d : sizes)
        if (__builtin_mul_overflow(numel, d, &numel)) {
          numel = std::numeric_limits<int64_t>::max();
          break;
        }
      if (!need || *need > static_cast<int64_t>(size / item) || numel > static_cast<int64_t>(size / item))
        throw usage_error(fmt::format("{}: a {} tensor of shape [{}] needs more than the {} bytes stored for it", where,
                                      c10::toString(*dtype), fmt::join(sizes, ", "), size),
                          kPt2Hint);
      // from_blob views the mapping; clone gives the tensor its own memory (the mapping goes).
      auto storage = torch::from_blob(const_cast<uint8_t*>(data), {static_cast<int64_t>(size / item)},
                                      torch::TensorOptions().dtype(*dtype));
      auto t = storage.as_strided(sizes, strides, offset).clone();
      t.set_requires_grad(false);
      out.emplace_back(key, t);
    }
    return out;
  }

  std::string path_;
  MappedFile m_;
  std::map<std::string, ZipMember> members_;
};

}  // namespace

Pt2Archive read_pt2(const std::string& path) { return Reader(path).read(); }

}  // namespace gputrain
