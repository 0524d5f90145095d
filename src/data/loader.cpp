// The Loader: worker threads fill staging buffers ahead of the consumer, bounded by the prefetch
// window; the consumer takes them strictly in order, so results never depend on thread timing.
//
// Staging buffers (pinned on CUDA) come from a pool and go back to it when the batch tensors
// that view them die, or, after a device copy, once the copy's event has completed: no host
// allocation per batch, and no buffer is overwritten while something still reads it.
#include "data/loader.h"

#include <ATen/record_function.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <functional>

#include "data/length_buckets.h"

namespace gputrain {

// One buffer per batch field; a field of varying size holds a flat buffer that grows to the
// longest batch seen (its view is shaped per batch).
class StagingPool {
 public:
  struct Spec {
    std::vector<int64_t> dims;  // [B, ...]; {0} for a varying field, sized when first written
    torch::ScalarType dtype;
  };
  StagingPool(std::vector<Spec> specs, bool pin) : specs_(std::move(specs)), pin_(pin) {}

  struct Slot {
    std::vector<torch::Tensor> fields;
    std::shared_ptr<void> fence;  // a device copy still reading this slot
  };

  // A free slot (a new one when all are in use), safe to write.
  int acquire() {
    std::shared_ptr<void> fence;
    int id;
    {
      std::lock_guard<std::mutex> lk(m_);
      if (free_.empty()) {
        Slot slot;
        for (const auto& s : specs_) slot.fields.push_back(buffer(s.dims, s.dtype));
        slots_.push_back(std::move(slot));
        free_.push_back(static_cast<int>(slots_.size()) - 1);
      }
      id = free_.front();  // the oldest: its copy has most likely finished
      free_.pop_front();
      fence = std::move(slots_[static_cast<size_t>(id)].fence);
    }
    DeviceCopier::wait(fence);
    return id;
  }
  void release(int id, std::shared_ptr<void> fence = nullptr) {
    std::lock_guard<std::mutex> lk(m_);
    slots_[static_cast<size_t>(id)].fence = std::move(fence);
    free_.push_back(id);
  }
  // The slot's buffers; a deque keeps references valid while the pool grows.
  Slot& slot(int id) {
    std::lock_guard<std::mutex> lk(m_);
    return slots_[static_cast<size_t>(id)];
  }
  // Field f of an acquired slot, grown to hold `numel` values (only its holder touches it).
  torch::Tensor& room(Slot& slot, size_t f, int64_t numel) {
    auto& t = slot.fields[f];
    if (t.numel() < numel) t = buffer({numel}, specs_[f].dtype);
    return t;
  }
  int64_t size() {
    std::lock_guard<std::mutex> lk(m_);
    return static_cast<int64_t>(slots_.size());
  }

 private:
  torch::Tensor buffer(const std::vector<int64_t>& dims, torch::ScalarType dtype) const {
    return torch::empty(dims, torch::TensorOptions().pinned_memory(pin_).dtype(dtype));
  }
  std::vector<Spec> specs_;
  bool pin_;
  std::mutex m_;
  std::deque<Slot> slots_;
  std::deque<int> free_;
};

namespace {

// Returns a slot to the pool when the last tensor viewing it dies, after `fence` if one is set.
struct Lease {
  std::shared_ptr<StagingPool> pool;
  int slot;
  std::shared_ptr<void> fence;
  ~Lease() { pool->release(slot, std::move(fence)); }
};

}  // namespace

Loader::Loader(DatasetPtr dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), opt_(options), copier_(opt_.device, opt_.non_blocking, opt_.channels_last) {
  opt_.pin_memory = opt_.pin_memory && torch::cuda::is_available();  // pinning needs a driver
  std::vector<StagingPool::Spec> specs;
  if (auto named = dataset_->named_fields()) {
    schema_ = schema_of(*dataset_);
    declared_ = named->fields.size();
    for (const auto& f : schema_.fields) {
      std::vector<int64_t> dims{opt_.batch_size};
      if (f.varies()) dims = {0};
      else dims.insert(dims.end(), f.shape.begin(), f.shape.end());
      specs.push_back({dims, f.dtype == DType::kI64 ? torch::kLong : torch::kFloat});
    }
  } else {
    std::vector<int64_t> x_dims{opt_.batch_size}, y_dims{opt_.batch_size};
    for (auto d : dataset_->sample_shape()) x_dims.push_back(d);
    if (dataset_->is_regression()) y_dims.push_back(dataset_->target_numel());
    if (opt_.mix.on()) y_dims.push_back(opt_.mix.classes);  // soft targets
    specs = {{x_dims, torch::kFloat}, {y_dims, dataset_->is_regression() || opt_.mix.on() ? torch::kFloat : torch::kLong}};
  }
  pool_ = std::make_shared<StagingPool>(std::move(specs), opt_.pin_memory);
}

Loader::~Loader() { stop_workers(); }

int64_t batches_per_epoch(int64_t all, const LoaderOptions& o) {
  if (!o.rank_batch_sizes.empty()) {
    int64_t global = 0;
    for (int64_t b : o.rank_batch_sizes) global += b;
    return all / global;
  }
  const int64_t world = o.world_size;
  const int64_t n = world == 1               ? all
                    : o.each_sample_once ? std::max<int64_t>(all - o.rank + world - 1, 0) / world
                    : o.drop_last        ? all / world
                                         : (all + world - 1) / world;
  const int64_t b = o.batch_size;
  return o.drop_last ? n / b : (n + b - 1) / b;
}

int64_t Loader::num_batches() const { return batches_per_epoch(dataset_->size(), opt_); }

std::vector<int64_t> Loader::epoch_order(int64_t epoch) const { return sample_order(*dataset_, opt_, epoch); }

std::vector<int64_t> sample_order(const Dataset& data, const LoaderOptions& o, int64_t epoch) {
  const int64_t n = data.size(), world = o.world_size;
  // A stream (shards) orders itself; anything else is shuffled uniformly.
  std::vector<int64_t> order = data.stream_order(o.seed, epoch, o.shuffle);
  if (order.empty()) {
    order.resize(static_cast<size_t>(n));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    if (o.shuffle) {
      Rng rng(mix_seed(o.seed, 0x5u, static_cast<uint64_t>(epoch)));
      for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
      bucket_by_length(order, o.bucket_window, data);
    }
  }
  if (world == 1) return order;
  if (!o.rank_batch_sizes.empty()) {
    // Global batch k is order[k*G, (k+1)*G); rank r takes its own stretch of each, after the
    // ranks before it: together they see what one process with batch G sees.
    int64_t global = 0, offset = 0;
    for (size_t r = 0; r < o.rank_batch_sizes.size(); ++r) {
      if (static_cast<int64_t>(r) < o.rank) offset += o.rank_batch_sizes[r];
      global += o.rank_batch_sizes[r];
    }
    std::vector<int64_t> mine;
    for (int64_t k = 0; (k + 1) * global <= n; ++k)
      for (int64_t i = 0; i < o.batch_size; ++i) mine.push_back(order[static_cast<size_t>(k * global + offset + i)]);
    return mine;
  }
  std::vector<int64_t> mine;
  if (o.each_sample_once) {
    for (int64_t i = o.rank; i < n; i += world) mine.push_back(order[static_cast<size_t>(i)]);
    return mine;
  }
  // Every rank gets the same number of samples: drop the tail, or pad by wrapping around.
  const int64_t per_rank = o.drop_last ? n / world : (n + world - 1) / world;
  for (int64_t k = 0; k < per_rank; ++k)
    mine.push_back(order[static_cast<size_t>((k * world + o.rank) % std::max<int64_t>(n, 1))]);
  return mine;
}

Loader::Ready Loader::make_batch(const std::vector<int64_t>& order, int64_t b, int64_t epoch) const {
  Ready r;
  int64_t begin = b * opt_.batch_size;
  r.count = std::min(opt_.batch_size, static_cast<int64_t>(order.size()) - begin);
  // A region of --profile's trace when the main thread loads (--num_workers 0). Loader threads
  // are not recorded: joining Kineto from a child thread shares the main thread's callback
  // handle, which then outlives the recording.
  RECORD_USER_SCOPE("gputrain::load_batch");
  try {
    r.slot = pool_->acquire();
    if (!schema_.fields.empty()) {
      r.padded = collate_fields(order, begin, r.count, epoch, r.slot);
      return r;
    }
    auto& slot = pool_->slot(r.slot);
    auto& slot_x = slot.fields[0];
    auto& slot_y = slot.fields[1];
    float* x = slot_x.data_ptr<float>();
    const int64_t numel = dataset_->sample_numel(), tnumel = dataset_->target_numel();
    const bool regression = dataset_->is_regression(), mix = opt_.mix.on();
    thread_local std::vector<int64_t> labels;  // before mixing turns them into soft targets
    labels.resize(static_cast<size_t>(r.count));
    for (int64_t j = 0; j < r.count; ++j) {
      int64_t index = order[static_cast<size_t>(begin + j)];
      uint64_t seed = mix_seed(opt_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index));
      if (regression)
        dataset_->get(index, x + j * numel, slot_y.data_ptr<float>() + j * tnumel, seed);
      else if (mix)
        labels[static_cast<size_t>(j)] = dataset_->get(index, x + j * numel, nullptr, seed);
      else
        slot_y.data_ptr<int64_t>()[j] = dataset_->get(index, x + j * numel, nullptr, seed);
    }
    if (mix) {
      // One draw per batch, from (seed, epoch, batch, rank): a resume redraws it exactly.
      Rng rng(mix_seed(mix_seed(opt_.seed, 0x31c, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(b),
                       static_cast<uint64_t>(opt_.rank)));
      const auto shape = dataset_->sample_shape();  // C x H x W (the options check)
      const MixDraw d = draw_mix(opt_.mix, shape[1], shape[2], rng);
      apply_mix(opt_.mix, d, x, r.count, shape[0], shape[1], shape[2], labels.data(), slot_y.data_ptr<float>());
    }
  } catch (...) {
    r.error = std::current_exception();
  }
  return r;
}

int64_t Loader::collate_fields(const std::vector<int64_t>& order, int64_t begin, int64_t count, int64_t epoch,
                               int slot_id) const {
  auto& slot = pool_->slot(slot_id);
  const auto& fields = schema_.fields;
  auto elem = [](const TensorField& f) -> int64_t { return f.dtype == DType::kI64 ? 8 : 4; };
  auto inner = [](const TensorField& f) {
    return Dataset::numel(std::vector<int64_t>(f.shape.begin() + (f.varies() ? 1 : 0), f.shape.end()));
  };
  // A varying field's samples go to this thread's scratch first: the batch's longest is known
  // only after the last one. The memory is kept from batch to batch.
  struct Scratch {
    std::vector<char> bytes;
    std::vector<size_t> offset;
    std::vector<int64_t> length;
  };
  thread_local std::vector<Scratch> scratch;
  scratch.resize(fields.size());
  for (auto& s : scratch) {
    s.bytes.clear();
    s.offset.assign(static_cast<size_t>(count), 0);
    s.length.assign(static_cast<size_t>(count), 0);
  }
  struct Writer final : FieldWriter {
    Writer(const Loader& l, StagingPool::Slot& s, std::function<int64_t(const TensorField&)> e,
           std::function<int64_t(const TensorField&)> i)
        : loader(l), slot(s), elem(std::move(e)), inner(std::move(i)) {}
    const Loader& loader;
    StagingPool::Slot& slot;
    int64_t j = 0;
    std::function<int64_t(const TensorField&)> elem, inner;
    void* field(size_t f, int64_t length) override {
      if (f >= loader.declared_) throw std::logic_error("get_fields: no field " + std::to_string(f));
      const TensorField& d = loader.schema_.fields[f];
      if (!d.varies()) return static_cast<char*>(slot.fields[f].data_ptr()) + j * Dataset::numel(d.shape) * elem(d);
      if (length < 0) throw std::logic_error("get_fields: a negative length for '" + d.name + "'");
      auto& s = scratch[f];
      s.offset[static_cast<size_t>(j)] = s.bytes.size();
      s.length[static_cast<size_t>(j)] = length;
      s.bytes.resize(s.bytes.size() + static_cast<size_t>(length * inner(d) * elem(d)));
      return s.bytes.data() + s.offset[static_cast<size_t>(j)];
    }
  } writer(*this, slot, elem, inner);
  for (int64_t j = 0; j < count; ++j) {
    const int64_t index = order[static_cast<size_t>(begin + j)];
    writer.j = j;
    dataset_->get_fields(index, writer, mix_seed(opt_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index)));
  }
  // Padded to the batch's longest sample; on CUDA to a multiple of 8, the size tensor cores tile,
  // but never beyond the data's longest, which the model was checked and sized against.
  std::vector<int64_t> longest(static_cast<size_t>(count), 0);
  int64_t padded = 0, cap = 0;
  for (size_t f = 0; f < declared_; ++f)
    if (fields[f].varies()) {
      cap = std::max(cap, fields[f].longest);
      for (size_t j = 0; j < longest.size(); ++j) longest[j] = std::max(longest[j], scratch[f].length[j]);
    }
  for (int64_t l : longest) padded = std::max(padded, l);
  if (opt_.device.is_cuda()) padded = std::max(padded, std::min((padded + 7) / 8 * 8, cap));
  for (size_t f = 0; f < declared_; ++f) {
    const TensorField& d = fields[f];
    if (!d.varies()) continue;
    const int64_t row = padded * inner(d);
    auto& buf = pool_->room(slot, f, opt_.batch_size * row);
    buf.narrow(0, 0, count * row).fill_(d.pad);
    char* base = static_cast<char*>(buf.data_ptr());
    for (size_t j = 0; j < longest.size(); ++j)
      std::memcpy(base + static_cast<int64_t>(j) * row * elem(d), scratch[f].bytes.data() + scratch[f].offset[j],
                  static_cast<size_t>(scratch[f].length[j] * inner(d) * elem(d)));
  }
  for (size_t f = declared_; f < fields.size(); ++f)  // the collate's own: "length"
    std::memcpy(slot.fields[f].data_ptr(), longest.data(), longest.size() * sizeof(int64_t));
  return padded;
}

Batch Loader::deliver(const Ready& r) {
  if (r.error) {
    if (r.slot >= 0) pool_->release(r.slot);
    std::rethrow_exception(r.error);
  }
  auto lease = std::shared_ptr<Lease>(new Lease{pool_, r.slot, nullptr});  // no temporary: it would release
  auto& slot = pool_->slot(r.slot);
  auto view = [&](const torch::Tensor& buf, std::vector<int64_t> sizes) {
    sizes[0] = r.count;
    return torch::from_blob(
        buf.data_ptr(), sizes, [lease](void*) {}, buf.options());
  };
  Batch host;
  if (schema_.fields.empty()) {
    host = Batch{view(slot.fields[0], slot.fields[0].sizes().vec()), view(slot.fields[1], slot.fields[1].sizes().vec())};
  } else {
    for (size_t f = 0; f < schema_.fields.size(); ++f) {
      const auto& field = schema_.fields[f];
      std::vector<int64_t> sizes{r.count};
      if (field.varies()) sizes.push_back(r.padded);
      sizes.insert(sizes.end(), field.shape.begin() + (field.varies() ? 1 : 0), field.shape.end());
      host.names.push_back(field.name);
      host.tensors.push_back(view(slot.fields[f], sizes));
    }
    host.target = schema_.target;
  }
  return copier_.copy(host, &lease->fence);
  // `host` and `lease` die here; on the CPU the returned batch views the slot and keeps it.
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
    for (auto& [b, r] : ready_)
      if (r.slot >= 0) pool_->release(r.slot);
    ready_.clear();
  }
  if (opt_.num_workers > 0 && workers_.empty()) start_workers();
  work_cv_.notify_all();
}

void Loader::worker_loop() {
  const int64_t window = opt_.num_workers * opt_.prefetch_factor;
  std::unique_lock<std::mutex> lk(m_);
  while (true) {
    work_cv_.wait(lk, [&] { return stop_ || (next_issue_ < n_batches_ && next_issue_ < next_consume_ + window); });
    if (stop_) return;
    int64_t b = next_issue_++;
    uint64_t gen = generation_;
    int64_t epoch = epoch_;
    auto order = order_;
    lk.unlock();
    Ready r = make_batch(*order, b, epoch);
    lk.lock();
    if (gen == generation_) {
      ready_[b] = std::move(r);
      ready_cv_.notify_all();
    } else if (r.slot >= 0) {
      pool_->release(r.slot);
    }
  }
}

std::optional<Batch> Loader::next() {
  auto t0 = std::chrono::steady_clock::now();
  auto waited = [&] { wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (!order_) start_epoch(epoch_);
  if (next_consume_ >= n_batches_) {
    if (!opt_.persistent_workers) stop_workers();
    return std::nullopt;
  }
  if (opt_.num_workers == 0) {
    Ready r = make_batch(*order_, next_consume_++, epoch_);
    waited();
    return deliver(r);
  }
  std::unique_lock<std::mutex> lk(m_);
  ready_cv_.wait(lk, [&] { return ready_.count(next_consume_) > 0; });
  Ready r = std::move(ready_[next_consume_]);
  ready_.erase(next_consume_++);
  lk.unlock();
  work_cv_.notify_all();
  waited();
  return deliver(r);
}

double Loader::take_wait_seconds() {
  double w = wait_seconds_;
  wait_seconds_ = 0;
  return w;
}

int64_t Loader::staging_buffers() const { return pool_->size(); }

}  // namespace gputrain
