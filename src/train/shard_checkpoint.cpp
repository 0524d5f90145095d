// Sharded checkpoints (shard_checkpoint.h): shard files, their index, and the state any layout
// of pieces takes from them.
#include "train/shard_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "train/checkpoint_file.h"
#include "weights/safetensors.h"

namespace gputrain {
namespace fs = std::filesystem;

namespace {

// Index and file format version: a newer one is refused, never misread.
constexpr int kShardFormat = 1;

// Best effort: a folder's new entries made durable (as AtomicFile does after its rename).
void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Every parameter of the optimizer's groups, by position (as checkpoints number them).
std::vector<torch::Tensor> positions(Optimizer& optimizer) {
  std::vector<torch::Tensor> out;
  for (auto& g : optimizer.base().param_groups())
    for (const auto& p : g.params()) out.push_back(p);
  return out;
}

// A part of one parameter's state: elements [offset, offset + length) in logical order, each
// tensor 1-D ("step" 0-d).
struct Part {
  int64_t position = 0, offset = 0, length = 0;
  std::map<std::string, torch::Tensor> tensors;
};

// What a layout wants: the same, without the tensors.
struct Want {
  int64_t position = 0, offset = 0, length = 0;
};

// The pieces of `optimizer` in the order its update's groups hold them (its state's positions).
std::vector<Want> piece_wants(Optimizer& optimizer) {
  std::unordered_map<void*, int64_t> position;
  const auto params = positions(optimizer);
  for (size_t i = 0; i < params.size(); ++i) position[params[i].unsafeGetTensorImpl()] = static_cast<int64_t>(i);
  std::unordered_map<void*, const ShardPiece*> piece;
  for (const auto& p : optimizer.pieces()) piece[p.flat.unsafeGetTensorImpl()] = &p;
  std::vector<Want> out;
  for (auto& g : optimizer.param_groups())
    for (const auto& flat : g.params()) {
      const ShardPiece& p = *piece.at(flat.unsafeGetTensorImpl());
      out.push_back({position.at(p.param.unsafeGetTensorImpl()), p.offset, p.flat.numel()});
    }
  return out;
}

struct Index {
  std::string id, folder;  // folder: absolute
  int world = 0;
  std::vector<std::string> files, names;
  std::vector<int64_t> numels;
  // Each file's pieces, where the index lists them: a load opens only the files it overlaps.
  std::vector<std::vector<Want>> file_pieces;
};

// [[position, offset, length], ...]: a shard file's pieces as its metadata and the index list them.
nlohmann::json pieces_json(const std::vector<Want>& wants) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : wants) out.push_back({w.position, w.offset, w.length});
  return out;
}

Index parse_index(const std::string& text, const std::string& checkpoint_path) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) {
    return std::runtime_error(fmt::format("its shard index is damaged ({})", why));
  };
  if (!j.is_object()) throw bad("not a JSON object");
  if (j.value("format", 0) > kShardFormat)
    throw std::runtime_error(fmt::format("its shard index is format {}, newer than this gputrain reads ({})",
                                         j.value("format", 0), kShardFormat));
  Index x;
  try {
    x.id = j.at("save").get<std::string>();
    x.world = j.at("world").get<int>();
    x.files = j.at("files").get<std::vector<std::string>>();
    for (const auto& p : j.at("parameters")) {
      x.names.push_back(p.at(0).get<std::string>());
      x.numels.push_back(p.at(1).get<int64_t>());
    }
    if (j.contains("file_pieces")) {
      for (const auto& file : j.at("file_pieces")) {
        x.file_pieces.emplace_back();
        for (const auto& p : file) {
          const Want w{p.at(0).get<int64_t>(), p.at(1).get<int64_t>(), p.at(2).get<int64_t>()};
          if (w.position < 0 || w.offset < 0 || w.length < 0) throw bad("a negative piece");
          x.file_pieces.back().push_back(w);
        }
      }
    }
    const auto folder = j.at("folder").get<std::string>();
    // Inside the checkpoint's own folder: an index naming ../../elsewhere is damage.
    if (folder.empty() || fs::path(folder).is_absolute() || folder.find("..") != std::string::npos)
      throw bad("its folder '" + folder + "' is not inside the checkpoint's");
    x.folder = (fs::absolute(checkpoint_path).parent_path() / folder).string();
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  }
  if (x.world < 1 || static_cast<int>(x.files.size()) != x.world) throw bad("its files do not match its world size");
  if (!x.file_pieces.empty() && static_cast<int>(x.file_pieces.size()) != x.world)
    throw bad("its files' pieces do not match its world size");
  // The list only lets a load skip files: unless it covers every parameter whole, within
  // bounds, every file is read (and checked) instead.
  std::vector<int64_t> covered(x.numels.size(), 0);
  bool whole = !x.file_pieces.empty();
  for (const auto& file : x.file_pieces)
    for (const auto& w : file) {
      if (w.position >= static_cast<int64_t>(x.numels.size()) || w.length > x.numels[static_cast<size_t>(w.position)] ||
          w.offset > x.numels[static_cast<size_t>(w.position)] - w.length) {
        whole = false;
        continue;
      }
      covered[static_cast<size_t>(w.position)] += w.length;
    }
  for (size_t i = 0; whole && i < covered.size(); ++i) whole = covered[i] == x.numels[i];
  if (!whole) x.file_pieces.clear();
  for (const auto& f : x.files)
    if (f.find('/') != std::string::npos || f.find("..") != std::string::npos) throw bad("a file name '" + f + "'");
  return x;
}

// The parts of the state stored in `stored` itself (an unsharded record), flattened.
std::vector<Part> record_parts(const OptimizerState& stored) {
  std::vector<Part> out;
  for (const auto& [position, tensors] : stored.state) {
    Part p{position, 0, -1, {}};
    for (const auto& [key, t] : tensors) {
      if (key == "step") {
        p.tensors[key] = t;
        continue;
      }
      p.tensors[key] = t.reshape(-1);
      p.length = t.numel();
    }
    if (p.length >= 0) out.push_back(std::move(p));  // SGD without momentum keeps nothing
  }
  return out;
}

// The parts in one shard file, checked against the index it must belong to.
std::vector<Part> file_parts(const std::string& path, const Index& index, int rank) {
  if (!fs::exists(path))
    throw std::runtime_error(fmt::format("its shard file '{}' (rank {} of {}'s optimizer state) is missing", path, rank,
                                         index.world));
  Metadata meta;
  auto tensors = load_safetensors(path, &meta);  // damaged: an error naming it
  auto field = [&](const char* key) { return meta.count(key) ? meta.at(key) : std::string(); };
  if (field("gputrain_shard_save") != index.id)
    throw std::runtime_error(fmt::format("shard file '{}' belongs to another save (id '{}', the checkpoint names '{}')",
                                         path, field("gputrain_shard_save"), index.id));
  if (field("rank") != std::to_string(rank) || field("world") != std::to_string(index.world))
    throw std::runtime_error(fmt::format("shard file '{}' is rank {} of {}, not rank {} of {}", path, field("rank"),
                                         field("world"), rank, index.world));
  const auto pieces = nlohmann::json::parse(field("pieces"), nullptr, false);
  if (!pieces.is_array()) throw std::runtime_error(fmt::format("shard file '{}' lists no pieces", path));
  std::vector<Part> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& p = pieces[i];
    if (!p.is_array() || p.size() != 3 || !p[0].is_number_integer() || !p[1].is_number_integer() ||
        !p[2].is_number_integer())
      throw std::runtime_error(fmt::format("shard file '{}' has a damaged piece {}", path, i));
    Part part{p[0].get<int64_t>(), p[1].get<int64_t>(), p[2].get<int64_t>(), {}};
    if (part.position < 0 || part.position >= static_cast<int64_t>(index.numels.size()) || part.offset < 0 ||
        part.length < 1 || part.offset + part.length > index.numels[static_cast<size_t>(part.position)])
      throw std::runtime_error(fmt::format("shard file '{}' has a piece {} outside its parameter", path, i));
    const std::string prefix = std::to_string(i) + ".";
    for (auto& [name, t] : tensors)
      if (name.rfind(prefix, 0) == 0) {
        const std::string key = name.substr(prefix.size());
        if (key != "step" && t.numel() != part.length)
          throw std::runtime_error(fmt::format("shard file '{}': '{}' has {} elements, its piece {}", path, name,
                                               t.numel(), part.length));
        part.tensors[key] = t.reshape(key == "step" ? std::vector<int64_t>{} : std::vector<int64_t>{-1});
      }
    if (!part.tensors.empty()) out.push_back(std::move(part));
  }
  return out;
}

// Each want's state from parts given in batches (a shard file at a time, so that one file's
// tensors at most are held beside the result): overlaps are cut out as they come, and joined
// at the end.
class Assembly {
 public:
  Assembly(std::vector<Want> wants, std::vector<std::string> names) : wants_(std::move(wants)), names_(std::move(names)) {
    got_.resize(wants_.size());
    for (size_t i = 0; i < wants_.size(); ++i) by_position_[wants_[i].position].push_back(i);
  }

  void add(const std::vector<Part>& parts) {
    for (const auto& part : parts) {
      auto it = by_position_.find(part.position);
      if (it == by_position_.end()) continue;
      for (size_t w : it->second) {
        const Want& want = wants_[w];
        const int64_t from = std::max(part.offset, want.offset);
        const int64_t to = std::min(part.offset + part.length, want.offset + want.length);
        if (from >= to) continue;
        std::map<std::string, torch::Tensor> cut;
        for (const auto& [key, t] : part.tensors)
          cut[key] = key == "step" ? t.clone() : t.narrow(0, from - part.offset, to - from).clone();
        got_[w].push_back({from, to - from, std::move(cut)});
      }
    }
  }

  // Whether any of `parts` (a file's pieces) holds elements some want needs.
  bool needs(const std::vector<Want>& parts) const {
    for (const auto& part : parts) {
      auto it = by_position_.find(part.position);
      if (it == by_position_.end()) continue;
      for (size_t w : it->second)
        if (std::max(part.offset, wants_[w].offset) <
            std::min(part.offset + part.length, wants_[w].offset + wants_[w].length))
          return true;
    }
    return false;
  }

  // Want i's state (empty when no part held any), its tensors 1-D.
  std::map<std::string, torch::Tensor> take(size_t i) {
    auto& got = got_[i];
    if (got.empty()) return {};
    std::sort(got.begin(), got.end(), [](const Cut& a, const Cut& b) { return a.from < b.from; });
    const Want& want = wants_[i];
    int64_t at = want.offset;
    for (const auto& c : got)
      if (c.from == at) at += c.length;
    if (at != want.offset + want.length)
      throw std::runtime_error(fmt::format("its state for parameter '{}' covers part of elements {}..{} only "
                                           "(shard files missing or from another layout)",
                                           name(want.position), want.offset, want.offset + want.length));
    std::map<std::string, torch::Tensor> out;
    for (const auto& [key, first] : got.front().tensors) {
      if (key == "step") {
        out[key] = first;
        continue;
      }
      std::vector<torch::Tensor> slices;
      for (const auto& c : got) {
        auto it = c.tensors.find(key);
        if (it == c.tensors.end())
          throw std::runtime_error(fmt::format("its state for parameter '{}' lacks '{}' in part", name(want.position), key));
        slices.push_back(it->second);
      }
      out[key] = torch::cat(slices);
    }
    got.clear();
    return out;
  }

 private:
  std::vector<Want> wants_;
  std::vector<std::string> names_;
  struct Cut {
    int64_t from = 0, length = 0;
    std::map<std::string, torch::Tensor> tensors;
  };
  std::vector<std::vector<Cut>> got_;
  std::unordered_map<int64_t, std::vector<size_t>> by_position_;
  std::string name(int64_t position) const {
    return position < static_cast<int64_t>(names_.size()) ? names_[static_cast<size_t>(position)]
                                                          : std::to_string(position);
  }
};

// Feeds `a` every part of `stored`: its own state, or its shard files' one at a time (those
// that hold something `a` wants, where the index lists each file's pieces: a rank of N reads
// about one old file, not all N).
void feed(Assembly& a, const OptimizerState& stored, const std::string& checkpoint_path, ShardReads* reads = nullptr) {
  if (stored.shards.empty()) {
    a.add(record_parts(stored));
    return;
  }
  const Index index = parse_index(stored.shards, checkpoint_path);
  for (int r = 0; r < index.world; ++r) {
    if (!index.file_pieces.empty() && !a.needs(index.file_pieces[static_cast<size_t>(r)])) continue;
    a.add(file_parts((fs::path(index.folder) / index.files[static_cast<size_t>(r)]).string(), index, r));
    if (reads) ++reads->read;
  }
  if (reads) reads->files = index.world;
}

std::vector<std::string> index_names(const OptimizerState& stored, const std::string& checkpoint_path) {
  return stored.shards.empty() ? std::vector<std::string>() : parse_index(stored.shards, checkpoint_path).names;
}

}  // namespace

ShardSave new_shard_save(const std::string& checkpoint_path, int world) {
  std::random_device rd;
  const std::string id = fmt::format("{:08x}{:08x}", rd(), rd());
  const std::string stem = fs::path(checkpoint_path).filename().string();
  return {(fs::absolute(checkpoint_path).parent_path() / "shards" / (stem + "-" + id)).string(), stem + "-" + id, world};
}

std::string shard_file(const std::string& folder, int rank, int world) {
  return (fs::path(folder) / fmt::format("rank-{}-of-{}.safetensors", rank, world)).string();
}

void write_shard_file(const ShardSave& save, int rank, Optimizer& optimizer) {
  const OptimizerState state = capture_optimizer_state(optimizer);  // by piece position
  const std::vector<Want> wants = piece_wants(optimizer);
  NamedTensors tensors;
  for (size_t i = 0; i < wants.size(); ++i) {
    auto it = state.state.find(static_cast<int64_t>(i));
    if (it == state.state.end()) continue;
    for (const auto& [key, t] : it->second) tensors.emplace_back(fmt::format("{}.{}", i, key), t);
  }
  fs::create_directories(save.folder);
  // The new folders' entries survive a power cut (shards/ itself is new at the first save).
  sync_folder(fs::path(save.folder).parent_path());
  sync_folder(fs::path(save.folder).parent_path().parent_path());
  save_safetensors(shard_file(save.folder, rank, save.world), tensors,
                   {{"gputrain_shard_save", save.id},
                    {"format", std::to_string(kShardFormat)},
                    {"rank", std::to_string(rank)},
                    {"world", std::to_string(save.world)},
                    {"pieces", pieces_json(wants).dump()}});
}

std::string shard_pieces(Optimizer& optimizer) { return pieces_json(piece_wants(optimizer)).dump(); }

std::string shard_index(const ShardSave& save, const std::string& checkpoint_path, Optimizer& optimizer,
                        const Net& model, const std::vector<std::string>& file_pieces) {
  std::unordered_map<void*, std::string> names;
  for (const auto& p : model.named_parameters()) names[p.value().unsafeGetTensorImpl()] = p.key();
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : positions(optimizer)) params.push_back({names.at(p.unsafeGetTensorImpl()), p.numel()});
  nlohmann::json files = nlohmann::json::array();
  for (int r = 0; r < save.world; ++r) files.push_back(fs::path(shard_file(save.folder, r, save.world)).filename().string());
  return nlohmann::json{{"format", kShardFormat},
                        {"save", save.id},
                        {"world", save.world},
                        {"folder", fs::relative(save.folder, fs::absolute(checkpoint_path).parent_path()).string()},
                        {"files", files},
                        {"file_pieces", [&] {
                           nlohmann::json all = nlohmann::json::array();
                           for (const auto& p : file_pieces) all.push_back(nlohmann::json::parse(p));
                           return all;
                         }()},
                        {"parameters", params}}
      .dump();
}

OptimizerState optimizer_groups(Optimizer& optimizer) {
  OptimizerState out = capture_optimizer_state(optimizer);
  out.state.clear();
  // Renumbered over the whole parameters: the record's groups are the base optimizer's.
  int64_t index = 0;
  auto& full = optimizer.base().param_groups();
  for (size_t g = 0; g < out.groups.size() && g < full.size(); ++g) {
    out.groups[g].params.clear();
    for (size_t k = 0; k < full[g].params().size(); ++k) out.groups[g].params.push_back(index++);
  }
  return out;
}

OptimizerState state_for(Optimizer& optimizer, const OptimizerState& stored, const std::string& checkpoint_path,
                         ShardReads* reads) {
  if (stored.shards.empty() && !optimizer.sharded()) return stored;
  const auto params = positions(optimizer);
  if (!stored.shards.empty()) {
    const Index index = parse_index(stored.shards, checkpoint_path);
    bool same = index.numels.size() == params.size();
    for (size_t i = 0; same && i < params.size(); ++i) same = index.numels[i] == params[i].numel();
    if (!same) throw std::runtime_error("its sharded optimizer state is of other parameters than this run's model");
  }
  // A record's own state, cut for pieces below, must be its parameters' size (the sharded
  // index's sizes are checked above; apply_optimizer_state checks an unsharded whole).
  if (stored.shards.empty())
    for (const auto& [position, tensors] : stored.state)
      for (const auto& [key, t] : tensors)
        if (key != "step" && (position < 0 || position >= static_cast<int64_t>(params.size()) ||
                              t.numel() != params[static_cast<size_t>(position)].numel()))
          throw std::runtime_error(fmt::format("its optimizer state '{}' of parameter {} does not match this run's "
                                               "parameters", key, position));
  OptimizerState out;
  out.groups = stored.groups;
  if (!optimizer.sharded()) {
    std::vector<Want> wants;
    for (size_t i = 0; i < params.size(); ++i) wants.push_back({static_cast<int64_t>(i), 0, params[i].numel()});
    Assembly a(wants, index_names(stored, checkpoint_path));
    feed(a, stored, checkpoint_path, reads);
    for (size_t i = 0; i < params.size(); ++i) {
      auto m = a.take(i);
      if (m.empty()) continue;
      for (auto& [key, t] : m)
        if (key != "step") t = t.view(params[i].sizes());
      out.state[static_cast<int64_t>(i)] = std::move(m);
    }
    return out;
  }
  // Sharded: the record's groups with this rank's pieces in the place of parameters.
  if (stored.groups.size() != optimizer.param_groups().size())
    throw std::runtime_error(fmt::format("its optimizer has {} parameter groups, this run's {}", stored.groups.size(),
                                         optimizer.param_groups().size()));
  int64_t k = 0;
  for (size_t g = 0; g < out.groups.size(); ++g) {
    out.groups[g].params.clear();
    for (size_t i = 0; i < optimizer.param_groups()[g].params().size(); ++i) out.groups[g].params.push_back(k++);
  }
  const std::vector<Want> wants = piece_wants(optimizer);
  Assembly a(wants, index_names(stored, checkpoint_path));
  feed(a, stored, checkpoint_path, reads);
  for (size_t i = 0; i < wants.size(); ++i) {
    auto m = a.take(i);
    if (!m.empty()) out.state[static_cast<int64_t>(i)] = std::move(m);
  }
  return out;
}

OptimizerState consolidated_state(const OptimizerState& stored, const std::string& checkpoint_path,
                                  const NamedTensors& model) {
  if (stored.shards.empty()) return stored;
  const Index index = parse_index(stored.shards, checkpoint_path);
  std::map<std::string, torch::Tensor> by_name(model.begin(), model.end());
  std::vector<Want> wants;
  for (size_t i = 0; i < index.numels.size(); ++i) wants.push_back({static_cast<int64_t>(i), 0, index.numels[i]});
  Assembly a(wants, index.names);
  feed(a, stored, checkpoint_path);
  OptimizerState out;
  out.groups = stored.groups;
  for (size_t i = 0; i < wants.size(); ++i) {
    auto m = a.take(i);
    if (m.empty()) continue;
    auto it = by_name.find(index.names[i]);
    if (it == by_name.end() || it->second.numel() != index.numels[i])
      throw std::runtime_error(fmt::format("its shard index names parameter '{}', which its weights do not hold",
                                           index.names[i]));
    for (auto& [key, t] : m)
      if (key != "step") t = t.view(it->second.sizes());
    out.state[static_cast<int64_t>(i)] = std::move(m);
  }
  return out;
}

std::optional<std::vector<std::string>> referenced_shard_folders(const std::string& dir) {
  std::vector<std::string> out;
  try {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().extension() != ".pt") continue;
      const CheckpointData c = read_checkpoint_file(e.path().string(), CheckpointParts::Meta);
      if (!c.optimizer.shards.empty())
        out.push_back(fs::weakly_canonical(parse_index(c.optimizer.shards, e.path().string()).folder).string());
    }
  } catch (const std::exception&) {
    // A checkpoint that cannot be read now (newer, torn, or a passing I/O error) may still
    // name a folder: nothing is known to be unreferenced.
    return std::nullopt;
  }
  return out;
}

void copy_shards(const std::string& from, const std::string& to) {
  const CheckpointData c = read_checkpoint_file(from, CheckpointParts::Meta);
  if (c.optimizer.shards.empty()) return;
  const Index index = parse_index(c.optimizer.shards, from);
  const Index there = parse_index(c.optimizer.shards, to);
  if (fs::weakly_canonical(index.folder) == fs::weakly_canonical(there.folder)) return;
  fs::create_directories(there.folder);
  for (const auto& f : index.files)
    copy_file_atomically((fs::path(index.folder) / f).string(), (fs::path(there.folder) / f).string());
}

void remove_unreferenced_shards(const std::string& dir) {
  const fs::path shards = fs::path(dir) / "shards";
  if (std::error_code ec; !fs::is_directory(shards, ec)) return;
  const auto keep = referenced_shard_folders(dir);
  if (!keep) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(shards, ec)) {
    const std::string path = fs::weakly_canonical(e.path(), ec).string();
    if (!ec && e.is_directory(ec) && std::find(keep->begin(), keep->end(), path) == keep->end())
      fs::remove_all(e.path(), ec);  // best effort: a folder left over is reclaimed at a later save
  }
}

}  // namespace gputrain
