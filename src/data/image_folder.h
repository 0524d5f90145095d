// Image classification from a folder tree root/<class>/<image>.{jpg,jpeg,png}, as torchvision's ImageFolder.
#pragma once
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "data/image_sample.h"

namespace gputrain {

struct ImageFolderOptions : ImageSampleOptions {
  // Unreadable or corrupt images are dropped (found while scanning) or replaced by the next
  // good sample (found while loading) and counted, instead of stopping with an error.
  bool skip_bad = false;
  // A validation folder passes the training folder's class_names() so that class indices
  // agree; empty = the folder's own sorted subfolder names.
  std::vector<std::string> classes;
  // --num_classes: the model's class count when it must exceed the folders (0 = the folders).
  int64_t num_classes = 0;
  // Threads for the header scan at construction (0 = up to 8, by the machine's cores).
  int scan_threads = 0;
};

class ImageFolderDataset : public ImageSource {
 public:
  // Scans the tree and reads every image's header, so unreadable files are found now rather
  // than hours into training. Throws usage_error (exit 2) naming the folder or the file.
  ImageFolderDataset(const std::string& root, ImageFolderOptions options);

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  std::vector<int64_t> sample_shape() const override { return {opt_.channels, opt_.height, opt_.width}; }
  int64_t num_classes() const override { return class_count_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;
  int64_t load(int64_t index, float* out, uint64_t seed, const ImageSampleOptions& view) const override;

  const std::vector<std::string>& class_names() const { return classes_; }
  const std::vector<std::string>* label_names() const override { return classes_.empty() ? nullptr : &classes_; }
  // Path and label of sample i (sorted by class, then by path within the class).
  const std::string& path(int64_t index) const { return files_[index]; }
  int64_t label(int64_t index) const { return labels_[index]; }
  // Files skipped so far (with skip_bad): dropped at the scan plus found corrupt while loading.
  int64_t bad_samples() const;
  std::vector<std::string> bad_files() const;

 private:
  // Decodes sample `index` into `out`; returns "" or the reason it failed.
  std::string try_load(int64_t index, float* out, uint64_t seed, const ImageSampleOptions& view) const;

  std::string root_;
  ImageFolderOptions opt_;
  std::vector<std::string> classes_;
  int64_t class_count_ = 0;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  std::vector<std::string> scan_bad_;  // dropped while scanning
  mutable std::mutex mu_;
  mutable std::set<int64_t> load_bad_;  // indices found corrupt in get(), each counted once
};

std::shared_ptr<ImageFolderDataset> load_image_folder(const std::string& dir, ImageFolderOptions options);

}  // namespace gputrain
