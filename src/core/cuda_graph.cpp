// CudaGraph: at::cuda::CUDAGraph with the stream handling a whole-step capture needs.
#include "core/cuda_graph.h"

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

namespace gputrain {

struct CudaGraph::Impl {
  c10::DeviceIndex device;
  c10::cuda::CUDAStream side;
  std::unique_ptr<at::cuda::CUDAGraph> graph;

  // `to` waits for the work queued on `from` so far.
  static void order(const c10::cuda::CUDAStream& from, const c10::cuda::CUDAStream& to) {
    c10::cuda::CUDAEvent done;
    done.record(from);
    done.block(to);
  }
  // Runs `fn` on the side stream between the current stream's work before and after it, also
  // when `fn` throws.
  void on_side(const std::function<void()>& fn) {
    auto current = c10::cuda::getCurrentCUDAStream(device);
    order(current, side);
    try {
      c10::cuda::CUDAStreamGuard guard(side);
      fn();
    } catch (...) {
      order(side, current);
      throw;
    }
    order(side, current);
  }
};

CudaGraph::CudaGraph(int device)
    : impl_(std::make_unique<Impl>(Impl{static_cast<c10::DeviceIndex>(device),
                                        c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device)),
                                        nullptr})) {}

CudaGraph::~CudaGraph() = default;

void CudaGraph::run_on_side_stream(const std::function<void()>& fn) { impl_->on_side(fn); }

void CudaGraph::capture(const std::function<void()>& fn) {
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  const bool cache = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  try {
    impl_->on_side([&] {
      // Thread-local mode: the loader's threads may wait on events or pin memory meanwhile, which
      // the global mode would forbid (and fail the capture, or their batch).
      graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      try {
        fn();
      } catch (...) {
        try {
          graph->capture_end();  // ends the stream's capture mode; throws for an invalidated capture
        } catch (...) {
        }
        (void)cudaGetLastError();  // leave no capture error behind for the next CUDA call
        throw;
      }
      graph->capture_end();
    });
  } catch (...) {
    at::autocast::set_autocast_cache_enabled(cache);
    throw;
  }
  at::autocast::set_autocast_cache_enabled(cache);
  impl_->graph = std::move(graph);
}

bool CudaGraph::captured() const { return impl_->graph != nullptr; }

void CudaGraph::replay() { impl_->graph->replay(); }

}  // namespace gputrain
