// The Loader: batches from a Dataset on worker threads, with prefetch, seeded shuffling and
// optional pinned memory. Batch order depends on the seed and epoch only, never on threads.
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
};

struct Batch {
  torch::Tensor x;  // [B, C, H, W] float32
  torch::Tensor y;  // [B] int64
};

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
  // The next batch of the epoch, in order; nullopt at the end. Rethrows a worker's error.
  std::optional<Batch> next();
  // The sample order of an epoch.
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  // Seconds next() spent waiting for data since the last call.
  double take_wait_seconds();

 private:
  struct Result {
    Batch batch;
    std::exception_ptr error;
  };
  Batch make_batch(const std::vector<int64_t>& order, int64_t b) const;
  void worker_loop();
  void start_workers();
  void stop_workers();

  DatasetPtr dataset_;
  LoaderOptions opt_;
  std::vector<int64_t> shape_;
  int64_t epoch_ = 0;

  std::mutex m_;
  std::condition_variable work_cv_, ready_cv_;
  std::vector<std::thread> workers_;
  std::shared_ptr<const std::vector<int64_t>> order_;
  uint64_t generation_ = 0;  // bumped at each epoch start; results of older ones are dropped
  int64_t next_issue_ = 0, next_consume_ = 0, n_batches_ = 0;
  std::map<int64_t, Result> ready_;
  bool stop_ = false;
  double wait_seconds_ = 0;
};

}  // namespace gputrain
