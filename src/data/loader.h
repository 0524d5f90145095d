// The Loader: batches from a Dataset on worker threads, with prefetch, seeded shuffling, reused
// (pinned) staging buffers and device copies. Batch order depends on the seed and epoch only.
#pragma once
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <torch/types.h>

#include "data/dataset.h"
#include "data/device_copy.h"
#include "data/mixing.h"
#include "data/schema.h"

namespace gputrain {

struct LoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  int64_t num_workers = 0;      // 0: batches are made on the calling thread
  int64_t prefetch_factor = 2;  // batches in flight per worker
  bool persistent_workers = true;
  bool pin_memory = false;  // only honoured when CUDA is available
  uint64_t seed = 0;
  torch::Device device = torch::kCPU;  // where next() delivers batches
  bool non_blocking = false;           // CUDA: copy on a side stream (see DeviceCopier)
  bool channels_last = false;          // 4-D inputs delivered in NHWC
  int64_t rank = 0, world_size = 1;    // this process takes every world_size-th sample from rank
  // Unequal ranks: every rank's batch size (batch_size is this rank's). Each global batch of
  // their sum is cut in rank order; the tail short of one global batch is dropped.
  std::vector<int64_t> rank_batch_sizes;
  // Evaluation: rank r takes samples r, r + world_size, ... with no padding, so that sums over
  // the ranks count every sample once (the ranks' batch counts may differ by one).
  bool each_sample_once = false;
  // Training: MixUp / CutMix on each batch, which then carries soft targets [B, classes].
  MixOptions mix;
  // > 1 with shuffle: each window of this many samples of the shuffled epoch is sorted by sample
  // length, so that batches pad little (data/length_buckets.h).
  int64_t bucket_window = 0;
};

// Batches in one epoch of `samples` samples under `options` (this rank's share, drop_last).
int64_t batches_per_epoch(int64_t samples, const LoaderOptions& options);

// This rank's sample order in epoch `epoch` of `data` under `options`: a pure function of them.
std::vector<int64_t> sample_order(const Dataset& data, const LoaderOptions& options, int64_t epoch);

class StagingPool;

class Loader {
 public:
  Loader(DatasetPtr dataset, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int64_t num_batches() const;

  // Starts (or restarts) epoch `epoch`: its order is a pure function of (seed, epoch).
  // `first_batch` > 0 resumes inside the epoch, skipping batches already consumed.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch of the epoch, in order, on the device; nullopt at the end. Rethrows a
  // worker's error.
  std::optional<Batch> next();
  // This rank's sample order for an epoch.
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  // Seconds next() spent waiting for data since the last call.
  double take_wait_seconds();
  // Staging buffers allocated so far: they are recycled, so this stays near the prefetch window.
  int64_t staging_buffers() const;

 private:
  struct Ready {
    int slot = -1;
    int64_t count = 0;
    int64_t padded = 0;  // named fields: the size their varying fields were padded to
    std::exception_ptr error;
  };
  Ready make_batch(const std::vector<int64_t>& order, int64_t b, int64_t epoch) const;
  // A batch of named fields into slot `slot`; returns the padded size of its varying fields.
  int64_t collate_fields(const std::vector<int64_t>& order, int64_t begin, int64_t count, int64_t epoch, int slot) const;
  Batch deliver(const Ready& r);
  void worker_loop();
  void start_workers();
  void stop_workers();

  DatasetPtr dataset_;
  LoaderOptions opt_;
  SampleSchema schema_;     // a dataset of named fields' (with the collate's "length"); empty for x/y
  size_t declared_ = 0;     // the fields the dataset writes; the rest the collate fills
  std::shared_ptr<StagingPool> pool_;
  DeviceCopier copier_;
  int64_t epoch_ = 0;

  std::mutex m_;
  std::condition_variable work_cv_, ready_cv_;
  std::vector<std::thread> workers_;
  std::shared_ptr<const std::vector<int64_t>> order_;
  uint64_t generation_ = 0;  // bumped at each epoch start; results of older ones are dropped
  int64_t next_issue_ = 0, next_consume_ = 0, n_batches_ = 0;
  std::map<int64_t, Ready> ready_;
  bool stop_ = false;
  double wait_seconds_ = 0;
};

}  // namespace gputrain
