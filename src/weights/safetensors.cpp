// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON naming each
// tensor's dtype, shape and byte span, padded with spaces to a multiple of 8, then the data.
#include "weights/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "weights/unpickler.h"  // printable()

namespace gputrain {
namespace {

// The format is little-endian; so are all the machines gputrain targets (x86-64, aarch64).
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

// Python's safetensors refuses headers above 100 MB; so do we (a corrupt length is caught early).
constexpr uint64_t kMaxHeader = 100'000'000;

const std::vector<std::pair<const char*, torch::ScalarType>>& dtype_table() {
  static const std::vector<std::pair<const char*, torch::ScalarType>> table = {
      {"F64", torch::kDouble},
      {"F32", torch::kFloat},
      {"F16", torch::kHalf},
      {"BF16", torch::kBFloat16},
      {"I64", torch::kLong},
      {"I32", torch::kInt},
      {"I16", torch::kShort},
      {"I8", torch::kChar},
      {"U8", torch::kByte},
      {"BOOL", torch::kBool},
      {"F8_E4M3", torch::kFloat8_e4m3fn},
      {"F8_E5M2", torch::kFloat8_e5m2},
  };
  return table;
}

std::string dtype_name(torch::ScalarType t) {
  for (const auto& [name, type] : dtype_table())
    if (type == t) return name;
  throw runtime_error(std::string("dtype ") + c10::toString(t) + " has no safetensors name");
}

std::string errno_text() { return std::strerror(errno); }

Error cannot_write(const std::string& what, const std::string& path, const std::string& why) {
  return usage_error("cannot write " + what + " '" + path + "' (" + why + ")",
                     "check that the folder exists and is writable, or pass another path");
}

}  // namespace

void check_writable(const std::string& path, const std::string& what) {
  if (std::filesystem::is_directory(path)) throw cannot_write(what, path, "it is a folder");
  if (const int own = own_descriptor(path); own >= 0) {  // /dev/stdout: its descriptor is written
    const int flags = ::fcntl(descriptor_to_write(own), F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY)
      throw cannot_write(what, path, flags < 0 ? "this process has no such descriptor open" : "it is open read-only");
    if (own == 1) keep_stdout_for_data();  // the stream carries the data alone: reports go to stderr
    return;
  }
  if (is_special_file(path)) {  // written straight through: a pipe's reader may come later
    if (::access(path.c_str(), W_OK) != 0) throw cannot_write(what, path, errno_text());
    return;
  }
  const std::string target = write_target(path);  // a symlink's file is replaced in its own folder
  const std::string tmp = target + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw cannot_write(what, path, errno_text());
  ::close(fd);
  ::unlink(tmp.c_str());
}

NamedTensors model_tensors(const torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& p : model.named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

NamedTensors with_tied_names(NamedTensors tensors, const std::vector<std::pair<std::string, std::string>>& tied) {
  const size_t own = tensors.size();
  for (const auto& [alias, name] : tied)
    for (size_t i = 0; i < own; ++i)
      if (tensors[i].first == name) {
        const torch::Tensor shared = tensors[i].second;  // (emplace_back may move what tensors[i] is)
        tensors.emplace_back(alias, shared);
        break;
      }
  return tensors;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  // Contiguous CPU copies first: the header needs every byte size, and channels_last weights
  // must be stored in the NCHW order their shape describes.
  std::vector<torch::Tensor> cpu;
  nlohmann::json header = nlohmann::json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!names.insert(name).second || name == "__metadata__")
      throw runtime_error("tensor name '" + name + "' appears twice in an export");
    auto c = t.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = c.nbytes();
    header[name] = {
        {"dtype", dtype_name(c.scalar_type())}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    cpu.push_back(std::move(c));
  }
  nlohmann::json meta = {{"format", "pt"}};
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // aligns the data buffer to 8 bytes
  uint64_t length = text.size();

  AtomicFile file(path);
  file.write(&length, sizeof length);
  file.write(text.data(), text.size());
  for (const auto& c : cpu) file.write(c.data_ptr(), c.nbytes());
  file.commit();
}

namespace {

struct Span {
  uint64_t begin, end;
  std::string name;
};

}  // namespace

std::map<std::string, torch::Tensor> load_safetensors(const std::string& path, Metadata* metadata) {
  auto bad = [&](const std::string& why) {
    return usage_error("safetensors file '" + path + "' is invalid: " + why,
                       "the file is truncated or not a safetensors file; export it again");
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw usage_error("safetensors file '" + path + "' does not exist");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) throw usage_error("safetensors file '" + path + "' cannot be read (" + errno_text() + ")");
  if (file_size < 8) throw bad(fmt::format("the file is {} bytes, shorter than its 8-byte header length", file_size));

  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), sizeof length);
  if (length > file_size - 8)
    throw bad(fmt::format("header length {} runs past the end of the file ({} bytes)", length, file_size));
  if (length > kMaxHeader) throw bad(fmt::format("header length {} is above 100 MB", length));
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  if (!in) throw bad("the header cannot be read");
  // A JSON parser keeps one of two equal keys silently; Python's safetensors refuses the file,
  // and so does this (which tensor would be meant is the writer's secret).
  std::vector<std::set<std::string>> objects;  // the keys of each object being parsed
  std::string duplicate;
  const nlohmann::json::parser_callback_t keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) objects.emplace_back();
    if (event == E::object_end && !objects.empty()) objects.pop_back();
    if (event == E::key && !objects.empty() && !objects.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json header = nlohmann::json::parse(text, keys, false);
  if (text.empty() || text[0] != '{' || header.is_discarded() || !header.is_object())
    throw bad("the header is not a JSON object");
  if (!duplicate.empty()) throw bad("duplicate key '" + printable(duplicate) + "' in the header");

  const uint64_t data_size = file_size - 8 - length;
  std::vector<Span> spans;
  struct Entry {
    torch::ScalarType dtype;
    std::vector<int64_t> shape;
    Span span;
  };
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) throw bad("__metadata__ is not an object");
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) throw bad("__metadata__ value '" + k + "' is not a string");
        if (metadata) (*metadata)[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      throw bad(where + " lacks dtype, shape or data_offsets");
    const auto& dt = info["dtype"];
    const auto& table = dtype_table();
    auto it = std::find_if(table.begin(), table.end(), [&](const auto& e) { return dt.is_string() && dt == e.first; });
    if (it == table.end()) throw bad(where + " has unknown dtype " + dt.dump());
    const auto& shape_json = info["shape"];
    if (!shape_json.is_array() || shape_json.size() > 64) throw bad(where + " has a malformed shape");
    Entry e{it->second, {}, {}};
    uint64_t bytes = torch::elementSize(it->second);
    for (const auto& d : shape_json) {
      if (!d.is_number_unsigned()) throw bad(where + " has a malformed shape " + shape_json.dump());
      const uint64_t n = d.get<uint64_t>();
      if (n > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(bytes, n, &bytes))
        throw bad(where + " has an impossible shape " + shape_json.dump());
      e.shape.push_back(static_cast<int64_t>(n));
    }
    const auto& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad(where + " has malformed data_offsets " + off.dump());
    e.span = {off[0].get<uint64_t>(), off[1].get<uint64_t>(), name};
    if (e.span.begin > e.span.end || e.span.end > data_size)
      throw bad(fmt::format("{} has data_offsets {} outside the {}-byte data buffer", where, off.dump(), data_size));
    if (e.span.end - e.span.begin != bytes)
      throw bad(
          fmt::format("{} spans {} bytes but its dtype and shape need {}", where, e.span.end - e.span.begin, bytes));
    spans.push_back(e.span);
    entries.push_back(std::move(e));
  }
  // Like Python's safetensors: the tensors tile the data buffer exactly, with no overlap and no hole.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  uint64_t covered = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].begin < covered) throw bad("tensors '" + spans[i - 1].name + "' and '" + spans[i].name + "' overlap");
    if (spans[i].begin > covered) throw bad("a gap of unused bytes precedes tensor '" + spans[i].name + "'");
    covered = spans[i].end;
  }
  if (covered != data_size)
    throw bad(fmt::format("{} bytes after the last tensor belong to no tensor", data_size - covered));

  std::string data(data_size, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data_size));
  if (!in) throw bad("the data buffer cannot be read");
  std::map<std::string, torch::Tensor> out;
  for (const auto& e : entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
    if (t.nbytes() > 0) std::memcpy(t.data_ptr(), data.data() + e.span.begin, e.span.end - e.span.begin);
    out[e.span.name] = t;
  }
  return out;
}

}  // namespace gputrain
