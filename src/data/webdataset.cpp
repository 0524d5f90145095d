// WebDataset shards: indexed at start (headers and labels), images read by offset on demand.
#include "data/webdataset.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "data/labels.h"
#include "data/tar_index.h"

namespace gputrain {
namespace {

const char* kBadHint =
    "rewrite the shard (tools/make_shards.py writes them from an image folder), or pass --skip_bad_samples to "
    "skip such samples";

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// WebDataset's split of a member name: the key is everything up to the first dot of the file
// name ("a/b/000123"), the extension the rest ("jpg", "seg.png").
bool split_key(const std::string& name, std::string* key, std::string* ext) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) return false;
  *key = name.substr(0, dot);
  *ext = lower(name.substr(dot + 1));
  return true;
}

struct ShardScan {
  struct Found {
    uint64_t offset, size;
    int64_t label;
    std::string member;
  };
  std::vector<Found> samples;
  std::vector<std::string> problems;  // in shard order
  int64_t lost = 0;                   // samples dropped (a problem may be no sample's, as a cut between two)
};

ShardScan scan_shard(const std::string& shard) {
  ShardScan out;
  const TarIndex index = index_tar(shard);
  const ShardFile f(shard);
  if (f.fd < 0) throw usage_error(fmt::format("shard '{}': cannot open it ({})", shard, std::strerror(errno)));
  // A sample the shard drops: its problem, counted once.
  const auto drop = [&](std::string problem) {
    out.problems.push_back(std::move(problem));
    ++out.lost;
  };
  // Members sharing a key are consecutive in a shard: a sample ends where the key changes.
  bool last_incomplete = false;  // whether the shard's last sample lacks a member (a cut may go through it)
  std::string last_key;
  for (size_t i = 0; i < index.members.size();) {
    std::string key, ext;
    if (!split_key(index.members[i].name, &key, &ext)) {
      ++i;  // no extension (e.g. a stray README): not part of any sample, as in webdataset
      continue;
    }
    const TarMember* image = nullptr;
    const TarMember* cls = nullptr;
    std::vector<std::string> names, exts;
    std::string twice;  // an extension two members of the sample share
    for (std::string k, e; i < index.members.size() && split_key(index.members[i].name, &k, &e) && k == key; ++i) {
      names.push_back(index.members[i].name);
      if (twice.empty() && std::find(exts.begin(), exts.end(), e) != exts.end()) twice = e;
      exts.push_back(e);
      if (!image && (e == "jpg" || e == "jpeg" || e == "png")) image = &index.members[i];
      if (!cls && e == "cls") cls = &index.members[i];
    }
    last_key = key;
    last_incomplete = !twice.empty() ? false : !image || !cls;
    const std::string members = fmt::format("its members: {}", join(names, ", "));
    // Which one would be the sample's? WebDataset's own reader refuses it too.
    if (!twice.empty()) {
      drop(fmt::format("{}: sample '{}' has two '.{}' members in a row ({})", shard, key, twice, members));
      continue;
    }
    if (!image) {
      drop(fmt::format("{}: sample '{}' has no .jpg, .jpeg or .png image ({})", shard, key, members));
      continue;
    }
    if (!cls) {
      drop(fmt::format("{}: sample '{}' has no .cls label ({})", shard, key, members));
      continue;
    }
    char text[32] = {};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(cls->size, sizeof text - 1));
    if (f.read_at(cls->offset, text, n) != n)
      throw usage_error(fmt::format("shard '{}': cannot read member '{}'", shard, cls->name));
    char* end = nullptr;
    errno = 0;
    const long long label = std::strtoll(text, &end, 10);
    while (end && *end && std::isspace(static_cast<unsigned char>(*end))) ++end;
    // A class index is at most 2^24 (a head of 16.7 M outputs); larger is a corrupt label. A
    // negative number is a label: the class checks refuse it, naming the sample.
    if (cls->size >= sizeof text || end == text || (end && *end) || errno || label < -(1 << 24) || label > (1 << 24)) {
      drop(fmt::format("{}: member '{}' holds '{}', not a class index (0, 1, ...)", shard, cls->name,
                       std::string(text, n)));
      continue;
    }
    out.samples.push_back({image->offset, image->size, label, image->name});
  }
  if (!index.damage.empty()) {
    // The cut is the problem: the sample it went through is lost with it, not "unlabelled"
    // (counted once: as the incomplete last sample, or here, as the one whose member it cuts).
    if (last_incomplete)
      out.problems.pop_back();
    else if (index.cut_member)
      ++out.lost;
    out.problems.push_back(fmt::format("{}: {}{}", shard, index.damage,
                                       last_incomplete ? fmt::format(" (sample '{}' is cut short)", last_key) : ""));
  }
  return out;
}

}  // namespace

WebDataset::WebDataset(std::vector<std::string> shards, WebDatasetOptions options)
    : shards_(std::move(shards)), opt_(std::move(options)) {
  if (shards_.size() > UINT32_MAX) throw usage_error("too many shards");
  std::vector<ShardScan> scans(shards_.size());
  std::vector<std::exception_ptr> errors(shards_.size());
  int threads = opt_.scan_threads > 0 ? opt_.scan_threads
                                      : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), shards_.size()));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < shards_.size();) {
      try {
        scans[i] = scan_shard(shards_[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);

  for (size_t s = 0; s < scans.size(); ++s) {
    auto& scan = scans[s];
    if (!scan.problems.empty() && !opt_.skip_bad) {
      size_t more = scan.problems.size() - 1;
      for (size_t t = s + 1; t < scans.size(); ++t) more += scans[t].problems.size();
      throw usage_error(scan.problems[0] + (more ? fmt::format(" (and {} more problems)", more) : ""), kBadHint);
    }
    scan_bad_ += scan.lost;
    shard_first_.push_back(static_cast<int64_t>(samples_.size()));
    for (auto& f : scan.samples)
      samples_.push_back({static_cast<uint32_t>(s), f.offset, f.size, f.label, std::move(f.member)});
  }
  shard_first_.push_back(static_cast<int64_t>(samples_.size()));
  if (samples_.empty())
    throw usage_error(fmt::format("the {} shard(s) from '{}' hold no samples (an image and a .cls label each)",
                                  shards_.size(), shards_.front()),
                      "write shards with tools/make_shards.py");
  // The same checks as every other format's labels, each problem naming its shard and sample.
  const auto label = [&](int64_t i) { return static_cast<double>(samples_[static_cast<size_t>(i)].label); };
  const auto sample = [&](int64_t i) {
    const Sample& x = samples_[static_cast<size_t>(i)];
    std::string key, ext;
    split_key(x.member, &key, &ext);
    return fmt::format("{}: sample '{}'", shards_[x.shard], key);
  };
  const std::string what = fmt::format("the {} shard(s) from '{}'", shards_.size(), shards_.front());
  if (opt_.num_classes > 0 && opt_.classes_from != "--num_classes") {
    // The test shards, numbered by the training classes.
    for (int64_t i = 0; i < size(); ++i)
      if (label(i) < 0 || label(i) >= static_cast<double>(opt_.num_classes))
        throw usage_error(fmt::format("{} has label {}, outside the {} classes of {}", sample(i), label(i),
                                      opt_.num_classes, opt_.classes_from),
                          "evaluate on shards of the same classes");
    classes_ = opt_.num_classes;
  } else {
    classes_ = check_class_indices(what, size(), label, opt_.num_classes, sample);
  }
}

std::string WebDataset::where(int64_t index) const {
  const Sample& s = samples_[static_cast<size_t>(index)];
  return shards_[s.shard] + ": " + s.member;
}

std::string WebDataset::try_load(int64_t index, float* out, uint64_t seed, const ImageSampleOptions& view) const {
  const Sample& s = samples_[static_cast<size_t>(index)];
  // One open file per shard per thread would be many; a shard is opened per read, which the
  // kernel's page cache and the sequential stream order make cheap next to a decode.
  const ShardFile f(shards_[s.shard]);
  thread_local std::vector<uint8_t> buf;  // per loader thread: no allocation once warm
  buf.resize(static_cast<size_t>(s.size));
  if (f.fd < 0 || f.read_at(s.offset, buf.data(), buf.size()) != buf.size()) return where(index) + ": cannot read it";
  try {
    decode_sample(buf.data(), buf.size(), where(index), view, seed, out);
  } catch (const Error& e) {
    return e.problems.empty() ? where(index) + ": cannot decode" : e.problems[0];
  } catch (const std::exception& e) {  // an allocation a hostile header asked for
    return where(index) + ": cannot decode (" + e.what() + ")";
  }
  return "";
}

int64_t WebDataset::get(int64_t index, float* out, float*, uint64_t seed) const { return load(index, out, seed, opt_); }

int64_t WebDataset::load(int64_t index, float* out, uint64_t seed, const ImageSampleOptions& view) const {
  const int64_t n = size();
  for (int64_t tries = 0, i = index; tries < n; ++tries, i = (i + 1) % n) {
    if (opt_.skip_bad) {
      std::lock_guard<std::mutex> lock(mu_);
      if (load_bad_.count(i)) continue;
    }
    const std::string err = try_load(i, out, seed, view);
    if (err.empty()) return samples_[static_cast<size_t>(i)].label;
    if (!opt_.skip_bad) throw usage_error(err, kBadHint);
    std::lock_guard<std::mutex> lock(mu_);  // the next sample stands in: a run stays reproducible
    load_bad_.insert(i);
  }
  throw usage_error(fmt::format("shards from '{}': no image decodes (all {} are bad)", shards_.front(), n));
}

int64_t WebDataset::bad_samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return scan_bad_ + static_cast<int64_t>(load_bad_.size());
}

std::vector<int64_t> WebDataset::stream_order(uint64_t seed, int64_t epoch, bool shuffle) const {
  std::vector<int64_t> shard_order(shards_.size());
  for (size_t i = 0; i < shard_order.size(); ++i) shard_order[i] = static_cast<int64_t>(i);
  Rng rng(mix_seed(seed, 0x5d, static_cast<uint64_t>(epoch)));
  if (shuffle)
    for (size_t i = shard_order.size(); i > 1; --i) std::swap(shard_order[i - 1], shard_order[rng.below(i)]);
  std::vector<int64_t> out;
  out.reserve(samples_.size());
  std::vector<int64_t> buffer;
  const auto cap = static_cast<size_t>(std::max<int64_t>(1, opt_.shuffle_buffer));
  for (int64_t s : shard_order)
    for (int64_t i = shard_first_[static_cast<size_t>(s)]; i < shard_first_[static_cast<size_t>(s) + 1]; ++i) {
      if (!shuffle) {
        out.push_back(i);
      } else if (buffer.size() < cap) {
        buffer.push_back(i);  // filling up: nothing leaves yet
      } else {
        const size_t k = rng.below(cap);
        out.push_back(buffer[k]);
        buffer[k] = i;
      }
    }
  for (size_t i = buffer.size(); i > 1; --i) std::swap(buffer[i - 1], buffer[rng.below(i)]);
  out.insert(out.end(), buffer.begin(), buffer.end());
  return out;
}

}  // namespace gputrain
