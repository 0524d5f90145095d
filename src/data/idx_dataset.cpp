// MNIST-family datasets from IDX image and label files.
#include "data/idx_dataset.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "data/labels.h"

namespace gputrain {

IdxDataset::IdxDataset(IdxArray images, IdxArray labels, const std::string& where, int64_t classes)
    : images_(std::move(images)), labels_(std::move(labels)) {
  const auto& d = images_.dims;
  if (d.size() != 3 && d.size() != 4)
    throw usage_error(
        fmt::format("{}: images must have 3 dimensions (N, H, W) or 4 (N, C, H, W), got {}", where, d.size()));
  if (labels_.dims.size() != 1)
    throw usage_error(fmt::format("{}: labels must have 1 dimension, got {}", where, labels_.dims.size()));
  n_ = d[0];
  if (labels_.dims[0] != n_)
    throw usage_error(
        fmt::format("{}: {} images but {} labels (the files do not belong together)", where, n_, labels_.dims[0]));
  shape_ = d.size() == 3 ? std::vector<int64_t>{1, d[1], d[2]} : std::vector<int64_t>{d[1], d[2], d[3]};
  numel_ = shape_[0] * shape_[1] * shape_[2];
  classes_ = check_class_indices(where, n_, [this](int64_t i) { return labels_.data[static_cast<size_t>(i)]; }, classes);
}

int64_t IdxDataset::get(int64_t index, float* out, float*, uint64_t) const {
  const uint8_t* src = images_.data.data() + index * numel_;
  for (int64_t i = 0; i < numel_; ++i) out[i] = src[i] * (1.0f / 255.0f);
  return labels_.data[index];
}

std::shared_ptr<IdxDataset> load_idx_split(const std::string& dir, const std::string& prefix,
                                           const std::string& dataset_name, int64_t classes) {
  namespace fs = std::filesystem;
  auto locate = [&](const std::string& stem) {
    for (const auto& name : {stem, stem + ".gz"}) {
      fs::path p = fs::path(dir) / name;
      if (fs::exists(p)) return p.string();
    }
    std::string hint = dataset_name == "fashion-mnist"
                           ? "install it with `sudo apt-get install dataset-fashion-mnist`, "
                             "or pass --data_dir DIR holding the four IDX files"
                           : "pass --data_dir DIR holding the four " + dataset_name + " IDX files";
    throw usage_error("dataset '" + dataset_name + "' not found: no " + stem + "[.gz] in '" + dir + "'",
                      hint + " (or --dataset synthetic to run without data)");
  };
  std::string images = locate(prefix + "-images-idx3-ubyte");
  std::string labels = locate(prefix + "-labels-idx1-ubyte");
  return std::make_shared<IdxDataset>(read_idx(images), read_idx(labels), images + " + " + labels, classes);
}

}  // namespace gputrain
