// ImageFolder: scan root/<class>/<image>, check every header up front, decode and resize on demand.
#include "data/image_folder.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "data/image_decode.h"
#include "data/labels.h"

namespace gputrain {
namespace {

namespace fs = std::filesystem;

const char* kLayoutHint =
    "expected one subfolder per class holding its images: ROOT/cat/001.jpg, ROOT/cat/002.png, "
    "ROOT/dog/001.jpeg, ... (.jpg, .jpeg, .png)";
const char* kSkipHint = "fix or remove the file, or pass --skip_bad_samples to skip unreadable images";

// Enough for the header of nearly every JPEG (EXIF and ICC segments come before the size).
constexpr size_t kHeaderBytes = 64 * 1024;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Reads up to `limit` bytes of `path` into `buf` (all of it when limit is 0); false if unreadable.
bool read_bytes(const std::string& path, std::vector<uint8_t>& buf, size_t limit = 0) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return false;
  buf.clear();
  size_t want = limit ? limit : 1 << 20;
  while (true) {
    size_t have = buf.size();
    buf.resize(have + want);
    size_t got = std::fread(buf.data() + have, 1, want, f.get());
    buf.resize(have + got);
    if (got < want) return !std::ferror(f.get());
    if (limit) return true;
    want = std::min<size_t>(buf.size(), size_t{64} << 20);  // grow geometrically
  }
}

bool hidden(const fs::path& p) { return !p.filename().empty() && p.filename().string()[0] == '.'; }

bool image_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// Image files under one class folder, recursively as torchvision does, sorted by path.
std::vector<std::string> list_images(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
  if (ec) throw usage_error("cannot list '" + dir.string() + "': " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw usage_error("cannot list '" + dir.string() + "': " + ec.message());
    if (hidden(it->path())) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec) && image_extension(it->path())) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "" if the file's header is a readable JPEG/PNG of sane size, else the reason.
std::string check_header(const std::string& path, int64_t max_pixels) {
  std::vector<uint8_t> buf;
  std::error_code ec;
  const uint64_t file_size = fs::file_size(path, ec);
  if (ec || !read_bytes(path, buf, kHeaderBytes)) return "cannot read the file";
  int64_t h = 0, w = 0;
  std::string why;
  if (read_image_header(buf.data(), buf.size(), &h, &w, &why, max_pixels, file_size)) return "";
  // Rare: metadata pushes the JPEG size marker past the first 64 KiB. Read it all and retry.
  if (why == "header not within the bytes read" && buf.size() == kHeaderBytes) {
    if (!read_bytes(path, buf)) return "cannot read the file";
    if (read_image_header(buf.data(), buf.size(), &h, &w, &why, max_pixels)) return "";
  }
  if (why == "header not within the bytes read") why = "truncated image header";
  return why;
}

}  // namespace

ImageFolderDataset::ImageFolderDataset(const std::string& root, ImageFolderOptions options)
    : root_(root), opt_(std::move(options)) {
  if (opt_.channels != 1 && opt_.channels != 3)
    throw usage_error(fmt::format("image channels must be 1 (gray) or 3 (RGB), not {}", opt_.channels));
  if (opt_.height <= 0 || opt_.width <= 0 || opt_.height > kMaxImageSide || opt_.width > kMaxImageSide)
    throw usage_error(fmt::format("image size {}x{} is out of range (1..{})", opt_.height, opt_.width, kMaxImageSide));
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw usage_error("image folder '" + root + "' not found (or not a folder)", kLayoutHint);

  std::vector<std::string> dirs;
  bool any_entry = false;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (hidden(e.path())) continue;
    any_entry = true;
    if (e.is_directory()) dirs.push_back(e.path().filename().string());
  }
  if (ec) throw usage_error("cannot list image folder '" + root + "': " + ec.message());
  if (!any_entry) throw usage_error("image folder '" + root + "' is empty", kLayoutHint);
  if (dirs.empty()) throw usage_error("image folder '" + root + "' has no class subfolders", kLayoutHint);
  std::sort(dirs.begin(), dirs.end());

  // A validation folder must number its classes as training did, or the labels would disagree.
  std::map<std::string, int64_t> index;
  classes_ = opt_.classes.empty() ? dirs : opt_.classes;
  for (size_t i = 0; i < classes_.size(); ++i) index[classes_[i]] = static_cast<int64_t>(i);
  for (const auto& d : dirs)
    if (!index.count(d))
      throw usage_error(fmt::format("image folder '{}': class folder '{}' is not one of the {} training classes", root,
                                    d, classes_.size()),
                        "the validation folder must use the training folder's class names");
  class_count_ = check_class_names("image folder '" + root + "'", static_cast<int64_t>(classes_.size()),
                                   opt_.num_classes);

  std::vector<std::string> all;
  std::vector<int64_t> all_labels;
  for (const auto& d : dirs) {
    auto imgs = list_images(fs::path(root) / d);
    if (imgs.empty())
      throw usage_error("class folder '" + (fs::path(root) / d).string() + "' has no .jpg/.jpeg/.png images",
                        kLayoutHint);
    all_labels.insert(all_labels.end(), imgs.size(), index[d]);
    all.insert(all.end(), std::make_move_iterator(imgs.begin()), std::make_move_iterator(imgs.end()));
  }

  // Header scan: many small reads, so a few threads hide the file system's latency.
  std::vector<std::string> reasons(all.size());
  int threads = opt_.scan_threads > 0 ? opt_.scan_threads
                                      : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  threads = static_cast<int>(std::min<size_t>(threads, std::max<size_t>(1, all.size() / 64)));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < all.size();) reasons[i] = check_header(all[i], opt_.max_pixels);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();

  std::vector<int64_t> kept_per_class(classes_.size(), 0);
  for (size_t i = 0; i < all.size(); ++i) {
    if (reasons[i].empty()) {
      files_.push_back(std::move(all[i]));
      labels_.push_back(all_labels[i]);
      ++kept_per_class[all_labels[i]];
      continue;
    }
    if (!opt_.skip_bad) {
      size_t more = std::count_if(reasons.begin() + i + 1, reasons.end(), [](auto& r) { return !r.empty(); });
      throw usage_error(
          fmt::format("{}: {}{}", all[i], reasons[i], more ? fmt::format(" (and {} more bad files)", more) : ""),
          kSkipHint);
    }
    scan_bad_.push_back(all[i]);
  }
  for (const auto& d : dirs)
    if (kept_per_class[index[d]] == 0)
      throw usage_error("class folder '" + (fs::path(root) / d).string() + "' has no readable images (all " +
                        "were skipped as bad)");
}

std::string ImageFolderDataset::try_load(int64_t index, float* out, uint64_t seed, const ImageSampleOptions& v) const {
  // Each loader thread keeps its read buffer, so steady-state loading does not allocate it.
  thread_local std::vector<uint8_t> buf;
  const std::string& p = files_[index];
  if (!read_bytes(p, buf)) return p + ": cannot read the file";
  try {
    decode_sample(buf.data(), buf.size(), p, v, seed, out);
  } catch (const Error& e) {
    return e.problems.empty() ? p + ": cannot decode" : e.problems[0];
  } catch (const std::exception& e) {  // an allocation a hostile header asked for
    return p + ": cannot decode (" + e.what() + ")";
  }
  return "";
}

int64_t ImageFolderDataset::get(int64_t index, float* out, float*, uint64_t seed) const {
  return load(index, out, seed, opt_);
}

int64_t ImageFolderDataset::load(int64_t index, float* out, uint64_t seed, const ImageSampleOptions& view) const {
  const int64_t n = size();
  for (int64_t tries = 0, i = index; tries < n; ++tries, i = (i + 1) % n) {
    if (opt_.skip_bad) {
      std::lock_guard<std::mutex> lock(mu_);
      if (load_bad_.count(i)) continue;  // known bad: go straight to its substitute
    }
    std::string err = try_load(i, out, seed, view);
    if (err.empty()) return labels_[i];
    if (!opt_.skip_bad) throw usage_error(err, kSkipHint);
    // Substituting the next index (not a random one) keeps a run reproducible.
    std::lock_guard<std::mutex> lock(mu_);
    load_bad_.insert(i);
  }
  throw usage_error(fmt::format("image folder '{}': no image decodes (all {} are bad)", root_, n));
}

int64_t ImageFolderDataset::bad_samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(scan_bad_.size() + load_bad_.size());
}

std::vector<std::string> ImageFolderDataset::bad_files() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out = scan_bad_;
  for (int64_t i : load_bad_) out.push_back(files_[i]);
  return out;
}

std::shared_ptr<ImageFolderDataset> load_image_folder(const std::string& dir, ImageFolderOptions options) {
  return std::make_shared<ImageFolderDataset>(dir, std::move(options));
}

}  // namespace gputrain
