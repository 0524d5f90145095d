// CIFAR-10/100 binary batches: locate, size-check and label-check every file before training.
#include "data/cifar.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "data/labels.h"

namespace gputrain {

namespace fs = std::filesystem;

CifarDataset::CifarDataset(std::vector<uint8_t> pixels, std::vector<uint8_t> labels, int64_t classes)
    : pixels_(std::move(pixels)), labels_(std::move(labels)), classes_(classes) {}

int64_t CifarDataset::get(int64_t index, float* out, float*, uint64_t) const {
  const uint8_t* src = pixels_.data() + index * kImageBytes;
  // The file already stores channel planes (R, G, B), which is CHW: a straight copy.
  for (int64_t i = 0; i < kImageBytes; ++i) out[i] = src[i] * (1.0f / 255.0f);
  return labels_[index];
}

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Appends the records of one batch file to `pixels` / `labels`.
void read_batch(const std::string& path, int classes, std::vector<uint8_t>& pixels, std::vector<uint8_t>& labels) {
  const std::string name = classes == 10 ? "CIFAR-10" : "CIFAR-100";
  // CIFAR-100 records carry a coarse label byte before the fine one.
  const int64_t label_bytes = classes == 10 ? 1 : 2;
  const int64_t record = label_bytes + CifarDataset::kImageBytes;
  const std::string hint =
      classes == 10 ? "download the binary version (cifar-10-binary.tar.gz), unpack it, pass --data_dir DIR"
                    : "download the binary version (cifar-100-binary.tar.gz), unpack it, pass --data_dir DIR";

  std::error_code ec;
  const auto bytes = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) throw usage_error(path + ": cannot read the file size (" + ec.message() + ")", hint);
  // Checking the size first means a wrong file is reported before anything is allocated.
  if (bytes == 0 || bytes % record != 0)
    throw usage_error(
        fmt::format("{}: truncated or not a {} batch: {} bytes is not a multiple of {}", path, name, bytes, record),
        hint);
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw usage_error(path + ": cannot open (not readable)", hint);

  const int64_t n = bytes / record;
  const size_t first = labels.size();
  labels.resize(first + n);
  pixels.resize((first + n) * CifarDataset::kImageBytes);
  std::vector<uint8_t> buf(static_cast<size_t>(record));
  for (int64_t i = 0; i < n; ++i) {
    if (std::fread(buf.data(), 1, buf.size(), f.get()) != buf.size())
      throw usage_error(fmt::format("{}: read failed at record {} (file changed while reading?)", path, i));
    const uint8_t label = buf[label_bytes - 1];  // the fine label for CIFAR-100
    if (label >= classes)
      throw usage_error(
          fmt::format("{}: record {} has label {}, outside 0..{} (not a {} batch?)", path, i, label, classes - 1, name),
          hint);
    labels[first + i] = label;
    std::copy(buf.begin() + label_bytes, buf.end(), pixels.begin() + (first + i) * CifarDataset::kImageBytes);
  }
}

}  // namespace

std::shared_ptr<CifarDataset> load_cifar_split(const std::string& dir, int classes, bool train, int64_t given) {
  if (classes != 10 && classes != 100) throw usage_error(fmt::format("CIFAR has 10 or 100 classes, not {}", classes));
  std::vector<std::string> files;
  if (classes == 10) {
    if (train)
      for (int i = 1; i <= 5; ++i) files.push_back(fmt::format("data_batch_{}.bin", i));
    else
      files.push_back("test_batch.bin");
  } else {
    files.push_back(train ? "train.bin" : "test.bin");
  }
  const std::string sub = classes == 10 ? "cifar-10-batches-bin" : "cifar-100-binary";
  const std::string tarball = classes == 10 ? "cifar-10-binary.tar.gz" : "cifar-100-binary.tar.gz";
  const std::string hint = "download the binary version (" + tarball + "), unpack it, pass --data_dir DIR" +
                           " (or --dataset synthetic to run without data)";

  // The files sit either directly in `dir` or in the folder the tarball unpacks to; the first
  // file decides which, so a half-copied mix of both is reported rather than silently merged.
  fs::path base = dir;
  if (!fs::exists(base / files[0]) && fs::exists(fs::path(dir) / sub / files[0])) base = fs::path(dir) / sub;
  for (const auto& file : files)
    if (!fs::is_regular_file(base / file))
      throw usage_error(fmt::format("CIFAR-{} not found: no {} in '{}'{}", classes, file, base.string(),
                                    base.string() == dir ? " (nor in its subfolder " + sub + ")" : ""),
                        hint);

  std::vector<uint8_t> pixels, labels;
  for (const auto& file : files) read_batch((base / file).string(), classes, pixels, labels);
  // --num_classes may ask for a different output count: the labels must still index it.
  const int64_t count = given > 0 ? check_class_indices(
                                        (base / files[0]).string() + (files.size() > 1 ? " (and the next batches)" : ""),
                                        static_cast<int64_t>(labels.size()),
                                        [&labels](int64_t i) { return labels[static_cast<size_t>(i)]; }, given)
                                  : classes;
  return std::make_shared<CifarDataset>(std::move(pixels), std::move(labels), count);
}

}  // namespace gputrain
