// Opening a checkpoint file that may be damaged, before anything trusts what LibTorch read.
#include "train/checkpoint_file.h"

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>

#include <c10/core/CPUAllocator.h>
#include <fmt/format.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/zip.h"

namespace gputrain {

const char* const kDamagedCheckpointHint =
    "the file is truncated, damaged or not from this model; use another checkpoint of the run (last.pt, best.pt, "
    "epoch-N.pt)";

namespace {

// TorchScript code a loader would compile and run (a __setstate__ runs as the file is read).
// gputrain's checkpoints declare their classes' attributes and define no method, so a member
// with a `def` is not one of them: refused before LibTorch reads anything.
bool defines_methods(const ZipMember& z, const uint8_t* data, uint64_t size) {
  const std::string& n = z.name;
  if (n.find("/code/") == std::string::npos || n.size() < 3 || n.compare(n.size() - 3, 3, ".py") != 0) return false;
  return std::string_view(reinterpret_cast<const char*>(data), size).find("def ") != std::string_view::npos;
}

// LibTorch does not check the CRC-32 its zip records carry: a flipped bit in a weight would load
// as a silently different model, and one in a pickle's length field can make its reader
// allocate gigabytes before it fails. So every member is checked here first: tensors and
// pickles are stored, the TorchScript code files deflated.
void verify_members(const std::string& path) {
  const std::string where = "checkpoint '" + path + "'";
  MappedFile m = map_file(path);
  for (const auto& z : zip_directory(where, m, kDamagedCheckpointHint)) {
    const std::string member = where + ": member '" + z.name + "'";
    const uint64_t start = zip_member_start(member, m, z, kDamagedCheckpointHint);
    bool code = false;
    if (z.method == 8) {
      const auto bytes = zip_inflate(member, m, z, start, kDamagedCheckpointHint);
      code = defines_methods(z, bytes->data(), bytes->size());
    } else if (z.method != 0) {
      throw usage_error(fmt::format("{} uses zip method {}, which LibTorch never writes", member, z.method),
                        kDamagedCheckpointHint);
    } else if (z.csize != z.usize) {
      throw usage_error(member + " has two different sizes", kDamagedCheckpointHint);
    } else if (!crc_matches(m.data + start, z.csize, z.crc)) {
      throw usage_error(member + " fails its CRC check", kDamagedCheckpointHint);
    } else {
      code = defines_methods(z, m.data + start, z.usize);
    }
    if (code)
      throw usage_error(member + " holds TorchScript methods, which loading would run: not a gputrain checkpoint",
                        "gputrain checkpoints define no code; pass one written by gputrain");
  }
}

// LibTorch's reader trusts the file twice over: a tensor's sizes, strides and offset are not
// checked against its storage, and a storage's size comes from the pickle, not from the data
// record read into it. Either lets a kernel write past the end of a buffer (the fuzz target
// found a heap corruption from one storage key changed to a smaller record's). So the file is
// first loaded on the CPU with every allocation's size recorded, and then every tensor must lie
// inside its storage, and every storage inside the buffer it really got.
class AllocationSizes final : public c10::Allocator {
 public:
  // One for the process: storages loaded while recording keep a pointer to it as their
  // allocator, so it forwards to the real CPU allocator for good.
  static AllocationSizes& instance() {
    static auto* sizes = new AllocationSizes();
    return *sizes;
  }

  // Between start() and stop(), CPU allocations (from any thread) go through this and are recorded.
  void start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (c10::GetCPUAllocator() != this) inner_.store(c10::GetCPUAllocator());
    sizes_.clear();
    recording_ = true;
    c10::SetCPUAllocator(this, kPriority);
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    recording_ = false;
    c10::SetCPUAllocator(inner_.load(), kPriority);
  }

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr p = inner_.load()->allocate(n);
    std::lock_guard<std::mutex> lock(mutex_);
    if (recording_) sizes_[p.get()] = n;
    return p;
  }
  c10::DeleterFnPtr raw_deleter() const override { return inner_.load()->raw_deleter(); }
  void copy_data(void* dest, const void* src, size_t count) const override {
    inner_.load()->copy_data(dest, src, count);
  }

  // The size of the allocation at `data`, if it was made while recording.
  std::optional<size_t> size_of(const void* data) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(data);
    return it == sizes_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }

 private:
  AllocationSizes() : inner_(c10::GetCPUAllocator()) {}
  static constexpr uint8_t kPriority = 255;  // SetCPUAllocator ignores lower priorities than the current
  std::atomic<c10::Allocator*> inner_;       // the real CPU allocator
  std::mutex mutex_;
  bool recording_ = false;
  std::map<const void*, size_t> sizes_;
};

bool fits_storage(const torch::Tensor& t) {
  if (t.numel() == 0) return true;
  int64_t last = t.storage_offset();  // the furthest element any index reaches
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t reach = 0;
    if (t.stride(d) < 0 || __builtin_mul_overflow(t.size(d) - 1, t.stride(d), &reach) ||
        __builtin_add_overflow(last, reach, &last))
      return false;
  }
  int64_t bytes = 0;
  if (last < 0 || __builtin_mul_overflow(last + 1, static_cast<int64_t>(t.element_size()), &bytes)) return false;
  return static_cast<uint64_t>(bytes) <= t.storage().nbytes();
}

void check_tensors(const c10::IValue& value, const std::string& name, AllocationSizes& allocations) {
  if (value.isTensor()) {
    const auto& t = value.toTensor();
    const auto buffer = allocations.size_of(t.storage().data());
    if (!fits_storage(t) || (buffer && *buffer < t.storage().nbytes()))
      throw std::runtime_error("tensor '" + name + "' reaches past its data");
  } else if (value.isList()) {
    for (const auto& v : value.toListRef()) check_tensors(v, name, allocations);
  } else if (value.isTuple()) {
    for (const auto& v : value.toTupleRef().elements()) check_tensors(v, name, allocations);
  } else if (value.isGenericDict()) {
    for (const auto& kv : value.toGenericDict()) check_tensors(kv.value(), name, allocations);
  }
}

void check_tensors(torch::serialize::InputArchive& archive, const std::string& prefix, AllocationSizes& allocations) {
  for (const auto& key : archive.keys()) {
    torch::serialize::InputArchive child;
    c10::IValue value;
    if (archive.try_read(key, child))
      check_tensors(child, prefix + key + ".", allocations);
    else if (archive.try_read(key, value))
      check_tensors(value, prefix + key, allocations);
  }
}

}  // namespace

torch::serialize::InputArchive open_checkpoint(const std::string& path, torch::Device device) {
  if (!std::filesystem::exists(path))
    throw usage_error("checkpoint '" + path + "' does not exist",
                      "a run keeps its checkpoints in <output_dir>/checkpoints/ (last.pt, best.pt, epoch-N.pt)");
  verify_members(path);
  torch::serialize::InputArchive archive;
  // On the CPU first, even for a GPU run: the copy to a GPU would read each claimed size.
  auto& allocations = AllocationSizes::instance();
  allocations.start();
  try {
    archive.load_from(path, torch::kCPU);
  } catch (...) {
    allocations.stop();
    throw;
  }
  allocations.stop();
  check_tensors(archive, "", allocations);
  if (device != torch::kCPU) archive.load_from(path, device);
  return archive;
}

}  // namespace gputrain
