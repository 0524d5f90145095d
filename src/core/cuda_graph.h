// One CUDA graph captured on a side stream and replayed on the current one (at::cuda::CUDAGraph),
// behind a torch-free interface. The trainer captures its whole step with it (--cuda_graphs).
#pragma once
#include <functional>
#include <memory>

namespace gputrain {

class CudaGraph {
 public:
  explicit CudaGraph(int device);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Runs `fn` eagerly on the side stream, ordered after and before the current stream's work.
  // Warm-up steps run so before a capture: lazy set-up (cuBLAS handles, autograd's streams,
  // optimizer state) then happens outside the graph, as PyTorch prescribes.
  void run_on_side_stream(const std::function<void()>& fn);
  // Records `fn` into the graph on the side stream: nothing runs. Autocast's weight cache is off
  // meanwhile (a cached cast would be a tensor of the capture, stale at replay). Throws when `fn`
  // does what a graph cannot hold (a host sync, say), with the capture closed.
  void capture(const std::function<void()>& fn);
  bool captured() const;
  // Launches the captured work on the current stream.
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputrain
