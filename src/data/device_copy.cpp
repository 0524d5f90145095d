// Host-to-device batch copies on a side CUDA stream; the compute stream waits on an event.
#include "data/device_copy.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/memory_format.h"

namespace gputrain {

struct DeviceCopier::SideStream {
  c10::cuda::CUDAStream stream;
};

DeviceCopier::DeviceCopier(torch::Device device, bool non_blocking, bool channels_last)
    : device_(device), channels_last_(channels_last) {
  if (device.is_cuda() && non_blocking)
    side_ = std::make_unique<SideStream>(SideStream{c10::cuda::getStreamFromPool(false, device.index())});
}

DeviceCopier::~DeviceCopier() = default;

Batch DeviceCopier::copy(const Batch& host, std::shared_ptr<void>* fence) const {
  fence->reset();
  // Images (4-D floating fields) in channels_last; to_channels_last leaves other shapes alone.
  auto layout = [&](const torch::Tensor& t) {
    return channels_last_ && t.is_floating_point() ? to_channels_last(t) : t;
  };
  if (!device_.is_cuda()) return host.map(layout);
  if (!side_) return host.map([&](const torch::Tensor& t) { return layout(t.to(device_)); });  // synchronous copies

  auto compute = c10::cuda::getCurrentCUDAStream(device_.index());
  Batch d;
  auto event = std::make_shared<at::cuda::CUDAEvent>();
  {
    c10::cuda::CUDAStreamGuard on_side(side_->stream);
    try {
      d = host.map([&](const torch::Tensor& t) { return layout(t.to(device_, /*non_blocking=*/true)); });
    } catch (...) {
      // A copy may already be in flight: the host buffer must not be reused before it ends.
      event->record(side_->stream);
      *fence = event;
      throw;
    }
    event->record(side_->stream);
  }
  event->block(compute);
  // The tensors were allocated on the side stream but are used (and freed) on the compute stream:
  // tell the caching allocator, or it could hand their memory out while compute still reads it.
  for (auto& t : d.tensors) t.record_stream(compute.unwrap());
  *fence = event;
  return d;
}

void DeviceCopier::wait(const std::shared_ptr<void>& fence) {
  if (fence) static_cast<at::cuda::CUDAEvent*>(fence.get())->synchronize();
}

}  // namespace gputrain
