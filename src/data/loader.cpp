// The Loader: worker threads fill whole batches ahead of the consumer, bounded by the prefetch
// window; the consumer takes them strictly in order, so results never depend on thread timing.
#include "data/loader.h"

#include <torch/cuda.h>

#include <chrono>

namespace gputrain {

Loader::Loader(DatasetPtr dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), opt_(options), shape_(dataset_->sample_shape()) {
  opt_.pin_memory = opt_.pin_memory && torch::cuda::is_available();  // pinning needs a driver
}

Loader::~Loader() { stop_workers(); }

int64_t Loader::num_batches() const {
  int64_t n = dataset_->size(), b = opt_.batch_size;
  return opt_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> Loader::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(dataset_->size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  if (opt_.shuffle) {
    Rng rng(mix_seed(opt_.seed, 0x5u, static_cast<uint64_t>(epoch)));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  }
  return order;
}

Batch Loader::make_batch(const std::vector<int64_t>& order, int64_t b) const {
  int64_t begin = b * opt_.batch_size;
  int64_t count = std::min(opt_.batch_size, static_cast<int64_t>(order.size()) - begin);
  std::vector<int64_t> dims{count};
  dims.insert(dims.end(), shape_.begin(), shape_.end());
  auto opts = torch::TensorOptions().pinned_memory(opt_.pin_memory);
  Batch batch{torch::empty(dims, opts.dtype(torch::kFloat)), torch::empty({count}, opts.dtype(torch::kLong))};
  float* x = batch.x.data_ptr<float>();
  int64_t* y = batch.y.data_ptr<int64_t>();
  const int64_t numel = batch.x.numel() / std::max<int64_t>(count, 1);
  for (int64_t j = 0; j < count; ++j) {
    int64_t index = order[static_cast<size_t>(begin + j)];
    uint64_t seed = mix_seed(opt_.seed, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(index));
    y[j] = dataset_->get(index, x + j * numel, nullptr, seed);
  }
  return batch;
}

void Loader::start_workers() {
  stop_ = false;
  for (int64_t i = 0; i < opt_.num_workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void Loader::start_epoch(int64_t epoch, int64_t first_batch) {
  auto order = std::make_shared<const std::vector<int64_t>>(epoch_order(epoch));
  {
    std::lock_guard<std::mutex> lk(m_);
    epoch_ = epoch;
    order_ = std::move(order);
    ++generation_;
    n_batches_ = num_batches();
    next_issue_ = next_consume_ = std::min(first_batch, n_batches_);
    ready_.clear();
  }
  if (opt_.num_workers > 0 && workers_.empty()) start_workers();
  work_cv_.notify_all();
}

void Loader::worker_loop() {
  const int64_t window = opt_.num_workers * opt_.prefetch_factor;
  std::unique_lock<std::mutex> lk(m_);
  while (true) {
    work_cv_.wait(lk, [&] {
      return stop_ || (next_issue_ < n_batches_ && next_issue_ < next_consume_ + window);
    });
    if (stop_) return;
    int64_t b = next_issue_++;
    uint64_t gen = generation_;
    auto order = order_;
    lk.unlock();
    Result r;
    try {
      r.batch = make_batch(*order, b);
    } catch (...) {
      r.error = std::current_exception();
    }
    lk.lock();
    if (gen == generation_) {
      ready_[b] = std::move(r);
      ready_cv_.notify_all();
    }
  }
}

std::optional<Batch> Loader::next() {
  auto t0 = std::chrono::steady_clock::now();
  auto waited = [&] {
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  if (!order_) start_epoch(epoch_);
  if (next_consume_ >= n_batches_) {
    if (!opt_.persistent_workers) stop_workers();
    return std::nullopt;
  }
  if (opt_.num_workers == 0) {
    Batch b = make_batch(*order_, next_consume_++);
    waited();
    return b;
  }
  std::unique_lock<std::mutex> lk(m_);
  ready_cv_.wait(lk, [&] { return ready_.count(next_consume_) > 0; });
  Result r = std::move(ready_[next_consume_]);
  ready_.erase(next_consume_++);
  lk.unlock();
  work_cv_.notify_all();
  waited();
  if (r.error) std::rethrow_exception(r.error);
  return std::move(r.batch);
}

double Loader::take_wait_seconds() {
  double w = wait_seconds_;
  wait_seconds_ = 0;
  return w;
}

}  // namespace gputrain
