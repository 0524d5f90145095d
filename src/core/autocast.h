// RAII autocast: enables mixed precision for one device type and restores the previous state.
#pragma once
#include <ATen/autocast_mode.h>

namespace gputrain {

class AutocastGuard {
 public:
  AutocastGuard(bool enabled, at::DeviceType device, at::ScalarType dtype) : enabled_(enabled), device_(device) {
    if (!enabled_) return;
    prev_enabled_ = at::autocast::is_autocast_enabled(device_);
    prev_dtype_ = at::autocast::get_autocast_dtype(device_);
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(device_, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    // The weight casts are cached while autocast is active; drop them when the outermost
    // region ends, or stale casts would survive the optimizer step.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_, prev_enabled_);
    at::autocast::set_autocast_dtype(device_, prev_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  at::DeviceType device_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

}  // namespace gputrain
