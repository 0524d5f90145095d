// torch.save's zip format (PyTorch 1.6 and later): <name>/data.pkl is the pickled object, whose
// tensors name storages kept raw in <name>/data/<key>; <name>/byteorder says their endianness.
#include "weights/torch_save.h"

#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/zip.h"
#include "weights/unpickler.h"

namespace gputrain {

const char* const kWeightsHint =
    "--init_from takes safetensors, a torch.save file of a state_dict (zip format) or a gputrain checkpoint";

namespace {

// The archive's folder: the part of "<name>/data.pkl" before data.pkl ("" when none is at depth 1).
std::string archive_prefix(const std::vector<ZipMember>& members) {
  for (const auto& z : members) {
    const auto slash = z.name.find('/');
    if (slash != std::string::npos && z.name.compare(slash, std::string::npos, "/data.pkl") == 0)
      return z.name.substr(0, slash + 1);
  }
  return "";
}

// A stored member's bytes as text (CRC-checked too).
std::string member_text(const std::string& path, const MappedFile& m, const ZipMember& z) {
  const auto [data, size] = zip_stored_bytes(path + ": " + z.name, m, z, kWeightsHint);
  return std::string(reinterpret_cast<const char*>(data), size);
}

// The largest header the safetensors readers accept (Python's refuses more than 100 MB).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

const std::vector<std::string> kWrappers = {"state_dict", "model_state_dict", "model", "module", "net"};
const std::vector<std::string> kEmaWrappers = {"state_dict_ema", "model_ema", "ema"};

}  // namespace

WeightsFormat detect_weights_format(const std::string& path, const MappedFile& m) {
  if (m.size >= 9) {  // a header of any plausible length (a truncated file is the reader's to word)
    uint64_t n = 0;
    std::memcpy(&n, m.data, 8);
    if (n >= 2 && n <= kMaxSafetensorsHeader && m.data[8] == '{') return WeightsFormat::Safetensors;
  }
  // The legacy format is a bare pickle (protocol 2) of torch.save's magic number, a long.
  if (m.size >= 4 && std::memcmp(m.data, "\x80\x02\x8a\x0a", 4) == 0) return WeightsFormat::LegacyTorchSave;
  if (m.size < 4 || std::memcmp(m.data, "PK\x03\x04", 4) != 0) return WeightsFormat::Unknown;
  const auto members = zip_directory(path, m, kWeightsHint);
  const std::string prefix = archive_prefix(members);
  bool pickle = false, code = false;
  for (const auto& z : members) {
    if (z.name == prefix + "data.pkl") pickle = true;
    if (z.name == prefix + "constants.pkl" || z.name.rfind(prefix + "code/", 0) == 0) code = true;
  }
  if (!pickle) return WeightsFormat::Unknown;
  // gputrain's checkpoints carry a format tag in their pickle: torch.save's layout since format
  // 3, archives LibTorch wrote as TorchScript (code/ and constants.pkl beside it) before.
  for (const auto& z : members)
    if (z.name == prefix + "data.pkl" && z.method == 0 && member_text(path, m, z).find("gputrain-checkpoint-") != std::string::npos)
      return WeightsFormat::GputrainCheckpoint;
  return code ? WeightsFormat::TorchScript : WeightsFormat::TorchSave;
}

uint64_t pickle_budget(const MappedFile& m) { return 2 * static_cast<uint64_t>(m.size) + (4ull << 20); }

Unpickled read_pickled_archive(const std::string& path, const MappedFile& m, const std::string& hint,
                               const PickleRules& rules, uint64_t copy_up_to) {
  const auto members = zip_directory(path, m, hint);
  const std::string prefix = archive_prefix(members);
  std::map<std::string, const ZipMember*> by_name;
  for (const auto& z : members) by_name[z.name] = &z;
  auto member = [&](const std::string& name) -> const ZipMember* {
    auto it = by_name.find(prefix + name);
    return it == by_name.end() ? nullptr : it->second;
  };
  const ZipMember* pkl = member("data.pkl");
  if (!pkl) throw usage_error(path + ": a zip without data.pkl: not a torch.save file", hint);
  if (const ZipMember* order = member("byteorder")) {
    if (member_text(path, m, *order) != "little")
      throw usage_error(path + ": its tensors are big-endian", "re-save it with torch.save on a little-endian machine");
  }

  uint64_t allocated = 0;  // storages' bytes so far: never more than the file holds
  const StorageReader storage = [&](const std::string& key, torch::ScalarType dtype, int64_t numel) {
    const ZipMember* z = member("data/" + key);
    if (!z) throw usage_error(fmt::format("{}: storage '{}' is missing from the archive", path, printable(key)), hint);
    const uint64_t element = c10::elementSize(dtype);
    // The claim is checked against the member's real size before anything is allocated.
    if (static_cast<uint64_t>(numel) > z->usize / element || static_cast<uint64_t>(numel) * element != z->usize)
      throw usage_error(fmt::format("{}: storage '{}' claims {} elements of {} but its member holds {} bytes", path,
                                    printable(key), numel, c10::toString(dtype), z->usize),
                        hint);
    // Members that overlap (several directory entries for one blob) would each be copied.
    allocated += z->usize;
    if (allocated > m.size)
      throw usage_error(fmt::format("{}: its storages add up to more bytes than the file holds (overlapping members)", path),
                        hint);
    if (z->usize > copy_up_to) return torch::empty({numel}, torch::TensorOptions().dtype(dtype).device(torch::kMeta));
    const auto [bytes, size] = zip_stored_bytes(path + ": " + z->name, m, *z, hint);
    torch::Tensor t = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
    if (size > 0) std::memcpy(t.data_ptr(), bytes, size);
    return t;
  };
  const auto [pickle, pickle_size] = zip_stored_bytes(path + ": " + pkl->name, m, *pkl, hint);
  return unpickle_weights(path, pickle, pickle_size, storage, hint, rules);
}

StateDict read_torch_save(const std::string& path, bool ema) {
  const MappedFile m = map_file(path);
  const Unpickled u = read_pickled_archive(path, m, kWeightsHint, {.memory_budget = pickle_budget(m)});

  using Kind = PickleValue::Kind;
  const PickleValue& root = u.at(u.root);
  if (root.kind != Kind::Dict)
    throw usage_error(path + ": holds a single object, not a dict of tensors (a state_dict)",
                      "save the weights in Python: torch.save(model.state_dict(), 'weights.pt')");
  // The string-keyed tensors of a dict, the later of a repeated key winning as in Python.
  auto tensors_of = [&](const PickleValue& dict) {
    StateDict s;
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
      const PickleValue &k = u.at(dict.items[i]), &v = u.at(dict.items[i + 1]);
      if (k.kind != Kind::String || v.kind != Kind::Tensor) continue;
      if (auto it = seen.find(k.text); it != seen.end())
        s.tensors[it->second].second = v.tensor;
      else {
        seen[k.text] = s.tensors.size();
        s.tensors.emplace_back(k.text, v.tensor);
      }
    }
    return s;
  };
  std::vector<std::string> keys;
  auto find = [&](const std::string& wanted) -> const PickleValue* {
    for (size_t i = 0; i + 1 < root.items.size(); i += 2) {
      const PickleValue& k = u.at(root.items[i]);
      if (k.kind == Kind::String && k.text == wanted && u.at(root.items[i + 1]).kind == Kind::Dict)
        return &u.at(root.items[i + 1]);
    }
    return nullptr;
  };
  for (size_t i = 0; i < root.items.size(); i += 2)
    if (u.at(root.items[i]).kind == Kind::String && keys.size() < 12) keys.push_back("'" + printable(u.at(root.items[i]).text, 40) + "'");
  // A dict of tensors alone is a state_dict; one with other values beside them (an epoch, a
  // best accuracy kept as a tensor) is a training checkpoint whose wrapper key holds the weights.
  StateDict top = tensors_of(root);
  if (!ema && 2 * top.tensors.size() == root.items.size()) return top;
  for (const auto& w : ema ? kEmaWrappers : kWrappers)
    if (const PickleValue* d = find(w)) {
      StateDict s = tensors_of(*d);
      if (s.tensors.empty()) continue;
      s.wrapper = w;
      if (const PickleValue* args = find("model_args"))  // nanoGPT's train.py saves the shape beside the model
        for (size_t i = 0; i + 1 < args->items.size(); i += 2) {
          const PickleValue &k = u.at(args->items[i]), &v = u.at(args->items[i + 1]);
          if (k.kind == Kind::String && (v.kind == Kind::Int || v.kind == Kind::Bool)) s.model_args[k.text] = v.integer;
        }
      return s;
    }
  if (!ema && !top.tensors.empty()) return top;
  throw usage_error(fmt::format("{}: no {}weights found (top-level keys: {})", path, ema ? "EMA " : "",
                                keys.empty() ? "none" : fmt::format("{}", fmt::join(keys, ", "))),
                    ema ? "drop --init_ema to start from the file's plain weights"
                        : "save the weights in Python: torch.save(model.state_dict(), 'weights.pt')");
}

}  // namespace gputrain
