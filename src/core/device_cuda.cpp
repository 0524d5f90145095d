// CUDA queries through ATen's CUDA context. Compiled always; answers "none" without a driver.
#include "core/device_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/cuda/memory_snapshot.h>
#include <torch/csrc/cuda/nccl.h>
#include <torch/cuda.h>

namespace gputrain {
namespace {

std::string dotted(long v, long major_div, long minor_div, long minor_mod) {
  return std::to_string(v / major_div) + "." + std::to_string((v / minor_div) % minor_mod);
}

// One tiny kernel on the GPU: fails only when torch has no kernel image for its architecture.
bool torch_has_kernels(int device) {
  try {
    auto t = at::zeros({1}, at::TensorOptions().device(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device))));
    return t.add_(1).item<float>() == 1.0f;
  } catch (const c10::Error& e) {
    return std::string(e.what()).find("no kernel image") == std::string::npos;
  }
}

}  // namespace

std::vector<GpuInfo> query_gpus() {
  std::vector<GpuInfo> gpus;
  if (!torch::cuda::is_available()) return gpus;
  int n = static_cast<int>(torch::cuda::device_count());
  for (int i = 0; i < n; ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    GpuInfo g;
    g.index = i;
    g.name = p->name;
    g.total_bytes = static_cast<int64_t>(p->totalGlobalMem);
    g.major = p->major;
    g.minor = p->minor;
    g.multiprocessors = p->multiProcessorCount;
    g.bf16 = g.tf32 = p->major >= 8;
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(i));
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) g.free_bytes = static_cast<int64_t>(free_b);
    g.kernels = torch_has_kernels(i);
    gpus.push_back(g);
  }
  return gpus;
}

std::string cuda_build_version() {
  try {
    long v = at::detail::getCUDAHooks().versionCUDART();  // e.g. 13020
    return dotted(v, 1000, 10, 100);
  } catch (const std::exception&) {
    return "n/a";
  }
}

std::string cudnn_version() {
  try {
    long v = at::detail::getCUDAHooks().versionCuDNN();  // e.g. 92600 (major*10000+minor*100+patch)
    return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
  } catch (const std::exception&) {
    return "n/a";
  }
}

std::string nccl_version() {
  try {
    uint64_t v = torch::cuda::nccl::version();  // major << 32 | minor << 16 | patch
    return std::to_string(v >> 32) + "." + std::to_string((v >> 16) & 0xffff) + "." + std::to_string(v & 0xffff);
  } catch (const std::exception&) {
    return "n/a";
  }
}

bool cuda_can_access_peer(int a, int b) {
  int can = 0;
  return cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess && can != 0;
}

std::string cuda_pci_bus_id(int device) {
  char id[32] = {};
  return cudaDeviceGetPCIBusId(id, sizeof id, device) == cudaSuccess ? std::string(id) : std::string();
}

std::string cuda_driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) return "n/a (no driver)";
  return dotted(v, 1000, 10, 100);
}

at::Tensor cuda_rng_state(int device) {
  auto gen = at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cuda_rng_state(int device, const at::Tensor& state) {
  auto gen = at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

int64_t cuda_peak_allocated(int device) {
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[0].peak;  // [0]: the aggregate over small and large pools
}

int64_t cuda_peak_reserved(int device) {
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.reserved_bytes[0].peak;
}

int64_t cuda_allocated(int device) {
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[0].current;
}

void cuda_record_memory_history(bool on) {
  // enabled "all": allocations and frees with their times; context none: no stack traces.
  if (on)
    torch::cuda::_record_memory_history(std::optional<std::string>("all"), std::nullopt, "python", 100000);
  else
    torch::cuda::_record_memory_history(std::optional<std::string>(), std::nullopt, "python", 0);
}

std::string cuda_memory_snapshot() { return torch::cuda::_memory_snapshot_pickled(); }

int64_t cuda_free_bytes(int device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  size_t free_b = 0, total_b = 0;
  return cudaMemGetInfo(&free_b, &total_b) == cudaSuccess ? static_cast<int64_t>(free_b) : 0;
}

void cuda_reset_peak(int device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

void cuda_synchronize(int device) { torch::cuda::synchronize(device); }

void cuda_empty_cache() { c10::cuda::CUDACachingAllocator::emptyCache(); }

at::Tensor copy_between_gpus(const at::Tensor& t, c10::Device to) {
  const c10::Device from = t.device();
  if (!from.is_cuda() || !to.is_cuda() || from == to) return t.to(to, /*non_blocking=*/true);
  c10::cuda::CUDAGuard guard(from);
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, from.index());
  c10::cuda::CUDAEvent produced;
  produced.record(c10::cuda::getCurrentCUDAStream(from.index()));
  produced.block(side);
  at::Tensor out;
  {
    c10::cuda::CUDAStreamGuard on_side(side);  // ATen's cross-device copy runs on the source's current stream
    out = t.to(to, /*non_blocking=*/true);
  }
  t.record_stream(side);
  return out;
}

namespace {
c10::cuda::CUDAEvent& as_event(const std::shared_ptr<void>& p) { return *static_cast<c10::cuda::CUDAEvent*>(p.get()); }
}  // namespace

void CudaEventTimer::mark() {
  auto* e = new c10::cuda::CUDAEvent(cudaEventDefault);  // timing enabled
  events_.emplace_back(e, [](void* p) { delete static_cast<c10::cuda::CUDAEvent*>(p); });
  e->record();
}

std::vector<double> CudaEventTimer::intervals_ms() {
  std::vector<double> out;
  if (events_.empty()) return out;
  as_event(events_.back()).synchronize();
  for (size_t i = 1; i < events_.size(); ++i)
    out.push_back(as_event(events_[i - 1]).elapsed_time(as_event(events_[i])));
  events_.clear();
  return out;
}

void cuda_set_sync_debug_error(bool error) {
  c10::cuda::warning_state().set_sync_debug_mode(error ? c10::cuda::SyncDebugMode::L_ERROR
                                                       : c10::cuda::SyncDebugMode::L_DISABLED);
}

}  // namespace gputrain
