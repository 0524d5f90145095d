// CUDA queries (GPUs, library versions). Compiled always; answers "none" without a driver.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/gpu_info.h"

namespace gputrain {

// Every visible GPU; empty when CUDA or its driver is absent.
std::vector<GpuInfo> query_gpus();

// Versions torch was built with, as "13.2", "9.10.2", "2.27.3"; "n/a" when not built with CUDA.
std::string cuda_build_version();
std::string cudnn_version();
std::string nccl_version();
// The driver's CUDA version ("n/a" without a driver).
std::string cuda_driver_version();

// Whether GPU `a` can read and write GPU `b`'s memory directly (peer access).
bool cuda_can_access_peer(int a, int b);
// The PCI bus id of a GPU ("0000:3B:00.0"): how NVML finds the same GPU ("" when unknown).
std::string cuda_pci_bus_id(int device);

// The random generator state of one GPU (for checkpoints).
at::Tensor cuda_rng_state(int device);
void set_cuda_rng_state(int device, const at::Tensor& state);

// Peak and current memory of the caching allocator on one GPU.
int64_t cuda_peak_allocated(int device);
int64_t cuda_peak_reserved(int device);  // held by the cache, allocated or not
void cuda_reset_peak(int device);
int64_t cuda_allocated(int device);
// The caching allocator's record of every allocation and free, kept while on: its snapshot is the
// pickle that PyTorch's memory viewer (pytorch.org/memory_viz) draws as a timeline. No stack
// traces (the C++ unwinder's cost would land on the steps being measured).
void cuda_record_memory_history(bool on);
std::string cuda_memory_snapshot();
// Bytes the driver has free on a GPU (outside every process's caches).
int64_t cuda_free_bytes(int device);
void cuda_synchronize(int device);
// Returns cached, unused blocks to the driver (after an out-of-memory error).
void cuda_empty_cache();
// CUDA's sync debug mode: with `error` on, any call that waits for the device throws (PyTorch's
// torch.cuda.set_sync_debug_mode("error")). For proving a loop free of host syncs.
void cuda_set_sync_debug_error(bool error);

// A copy from one GPU to another on a side stream of the source GPU, so it overlaps the sender's
// next kernels instead of queuing behind them on its stream. The side stream waits for the
// tensor, the destination's current stream waits for the copy (ATen orders a cross-device copy
// that way), and the source's memory is not reused before the copy has read it. Any other pair
// of devices: a plain non-blocking copy.
at::Tensor copy_between_gpus(const at::Tensor& t, c10::Device to);

// Times GPU work without syncing in the loop: mark() records an event on the current stream;
// intervals_ms() syncs once and returns the times between consecutive marks.
class CudaEventTimer {
 public:
  void mark();
  std::vector<double> intervals_ms();

 private:
  std::vector<std::shared_ptr<void>> events_;  // c10::cuda::CUDAEvent, kept opaque here
};

}  // namespace gputrain
