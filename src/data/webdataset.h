// WebDataset shards: tar files whose members sharing a basename form one sample
// (000123.jpg + 000123.cls), as the webdataset library and timm read them.
#pragma once
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "data/image_sample.h"

namespace gputrain {

struct WebDatasetOptions : ImageSampleOptions {
  // Samples without an image or a label, or in a truncated shard's cut tail, are dropped at
  // the scan, and images that do not decode are replaced by the next sample, all counted,
  // instead of stopping with an error.
  bool skip_bad = false;
  int64_t num_classes = 0;       // --num_classes: at least the labels' largest + 1 (0 = that)
  std::string classes_from = "--num_classes";  // where num_classes came from, for messages
  int64_t shuffle_buffer = 1000;  // samples the shuffled stream draws from (see stream_order)
  int scan_threads = 0;           // shards indexed at once (0 = up to 8, by the machine's cores)
};

class WebDataset : public ImageSource {
 public:
  // Indexes every shard's headers and reads the labels, so damage is found now rather than
  // hours into training. Throws usage_error (exit 2) naming the shard and the member.
  WebDataset(std::vector<std::string> shards, WebDatasetOptions options);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  std::vector<int64_t> sample_shape() const override { return {opt_.channels, opt_.height, opt_.width}; }
  int64_t num_classes() const override { return classes_; }
  int64_t get(int64_t index, float* x, float* target, uint64_t seed) const override;
  int64_t load(int64_t index, float* out, uint64_t seed, const ImageSampleOptions& view) const override;
  int64_t bad_samples() const override;

  // The stream a WebDataset pipeline reads: the shards in a seeded order per epoch (or as
  // listed), each one's samples as stored, then, when shuffling, a buffer of shuffle_buffer
  // samples that each new one replaces a random member of. A pure function of (seed, epoch),
  // the same for any number of ranks and threads, so a resume continues from the exact sample
  // with only the count of samples consumed. Reads stay within shuffle_buffer samples of the
  // stream's head.
  std::vector<int64_t> stream_order(uint64_t seed, int64_t epoch, bool shuffle) const override;

  const std::vector<std::string>& shards() const { return shards_; }
  // "<shard>: <member>" of sample i's image, as errors name it.
  std::string where(int64_t index) const;

 private:
  struct Sample {
    uint32_t shard;
    uint64_t offset, size;  // the image member's bytes
    int64_t label;
    std::string member;     // the image member's name
  };
  std::string try_load(int64_t index, float* out, uint64_t seed, const ImageSampleOptions& view) const;

  std::vector<std::string> shards_;
  WebDatasetOptions opt_;
  std::vector<Sample> samples_;
  std::vector<int64_t> shard_first_;  // index of each shard's first sample; one past the end last
  int64_t classes_ = 0;
  int64_t scan_bad_ = 0;
  mutable std::mutex mu_;
  mutable std::set<int64_t> load_bad_;
};

}  // namespace gputrain
