// Host-to-device batch copies on a side CUDA stream; the compute stream waits on an event.
#pragma once
#include <memory>

#include <torch/types.h>

#include "data/batch.h"

namespace gputrain {

// Copies host batches to `device`. With non_blocking on CUDA, the copy (and the channels_last
// conversion) runs on a side stream so it overlaps the previous step's compute, and the compute
// stream waits on an event before it touches the batch. On the CPU the batch is returned as is
// (only converted to channels_last when asked).
class DeviceCopier {
 public:
  DeviceCopier(torch::Device device, bool non_blocking, bool channels_last);
  ~DeviceCopier();
  // `fence` receives what must complete before the host buffers may be written again (null when
  // the copy has already finished by the time this returns).
  Batch copy(const Batch& host, std::shared_ptr<void>* fence) const;
  // Blocks until the copy behind a fence has finished.
  static void wait(const std::shared_ptr<void>& fence);

 private:
  struct SideStream;
  torch::Device device_;
  bool channels_last_;
  std::unique_ptr<SideStream> side_;  // set for CUDA with non_blocking
};

}  // namespace gputrain
