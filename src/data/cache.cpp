// --cache: keeps decoded samples in memory, so each file is read and decoded once per run.
#include "data/cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {

CachedDataset::CachedDataset(DatasetPtr base)
    : DatasetWrapper(std::move(base)), numel_(base_->sample_numel()), tnumel_(base_->target_numel()) {
  const int64_t n = base_->size();
  const double need = static_cast<double>(bytes());
  const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (need > 0.8 * have)
    throw usage_error(
        fmt::format("--cache needs {} MiB for the decoded samples, more than 80% of this machine's {} MiB",
                    static_cast<int64_t>(need / (1 << 20)), static_cast<int64_t>(have / (1 << 20))),
        "drop --cache, or lower --image_size");
  x_.reset(new float[static_cast<size_t>(n * numel_)]);
  t_.reset(new float[static_cast<size_t>(std::max<int64_t>(1, n * tnumel_))]);
  labels_.reset(new int64_t[static_cast<size_t>(n)]);
  state_.reset(new std::atomic<uint8_t>[static_cast<size_t>(n)]);
  for (int64_t i = 0; i < n; ++i) state_[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
}

int64_t CachedDataset::bytes() const {
  return base_->size() * (numel_ + tnumel_) * static_cast<int64_t>(sizeof(float)) + base_->size() * 9;
}

int64_t CachedDataset::get(int64_t index, float* x, float* target, uint64_t seed) const {
  auto& state = state_[static_cast<size_t>(index)];
  float* cx = x_.get() + index * numel_;
  float* ct = t_.get() + index * tnumel_;
  if (state.load(std::memory_order_acquire) == 2) {
    std::memcpy(x, cx, static_cast<size_t>(numel_) * sizeof(float));
    if (tnumel_) std::memcpy(target, ct, static_cast<size_t>(tnumel_) * sizeof(float));
    return labels_[static_cast<size_t>(index)];
  }
  int64_t label = base_->get(index, x, target, seed);
  uint8_t empty = 0;
  // Only one thread fills a slot; another one asking meanwhile just uses its own decode.
  if (state.compare_exchange_strong(empty, 1, std::memory_order_acq_rel)) {
    std::memcpy(cx, x, static_cast<size_t>(numel_) * sizeof(float));
    if (tnumel_) std::memcpy(ct, target, static_cast<size_t>(tnumel_) * sizeof(float));
    labels_[static_cast<size_t>(index)] = label;
    state.store(2, std::memory_order_release);
  }
  return label;
}

}  // namespace gputrain
