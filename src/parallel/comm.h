// The collectives of a data-parallel job, on c10d from the linked torch: a TCPStore rendezvous
// (hosted by rank 0, or torchrun's agent store), then ProcessGroupNCCL for a CUDA device or
// ProcessGroupGloo for the CPU. No transport of our own.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Work;
}

#include "core/error.h"
#include "parallel/rank_env.h"

namespace gputrain {

// A collective in flight; wait() blocks until it is done (and rethrows its failure).
class CommWork {
 public:
  virtual ~CommWork() = default;
  virtual void wait() = 0;
};

// A collective that failed (a rank stopped, hung or gone), with the ranks that did not come
// named. The fit loop keeps what is whole before it ends the run.
struct CollectiveFailed : Error {
  using Error::Error;
};

class Comm {
 public:
  // Joins the rendezvous of `env` (its store; all ranks must), under keys of this attempt
  // (env.restart_count). Refuses (exit 2, on every rank that hears it) a rank told another world
  // size than the first one to arrive, or a rank number taken twice; after `timeout_seconds`,
  // fails naming the ranks that never arrived.
  Comm(const RankEnv& env, double timeout_seconds);
  // Connects the collectives: NCCL on GPU `device_index`, Gloo on the CPU when it is < 0.
  void connect(int device_index);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  const RankEnv& env() const { return env_; }

  // The meetings below go through the store (before or after connect()). Each waits up to the
  // timeout, names the ranks that did not come, and stops with a refusal any rank made.

  // Rank 0's `value` on every rank. Returns on rank 0 once every rank has it.
  std::string share(const std::string& key, const std::string& value);
  // Every rank's `value`, in rank order, on rank 0; the others get their own alone.
  std::vector<std::string> gather(const std::string& key, const std::string& value);
  // This rank cannot start the job: every rank waiting in a meeting (or arriving later) throws
  // `e` too, with its exit code, and so does this one. The rank serving the store first gives
  // the others a moment to read it.
  [[noreturn]] void refuse(const Error& e);

  // Sums `t` over the ranks, in place; returns at once, the sum is there after wait().
  [[nodiscard]] std::unique_ptr<CommWork> all_reduce_sum(at::Tensor& t);
  // Sums each tensor over the ranks, in place (flattened into one buffer per dtype), and waits.
  void all_reduce_sum(const std::vector<at::Tensor>& tensors);
  // Every rank's `t` (same shape on all), in rank order, after waiting.
  std::vector<at::Tensor> all_gather(const at::Tensor& t);
  // Sharded data parallel's pair, on flat contiguous buffers; both return at once, the result is
  // there after wait(). reduce_scatter_sum: `out` (n elements) gets this rank's slice [rank * n,
  // (rank + 1) * n) of the sum over the ranks of `in` (size() * n elements). all_gather_into:
  // `out` (size() * n elements) gets every rank's `in` (n elements) end to end, in rank order;
  // `in` may be this rank's part of `out` (in place).
  // `scratch`, where given, keeps the buffer Gloo's road needs (size() * n elements: the one
  // received, or the one sent) for the next call of the same size, so none is allocated and freed
  // per call; the two may share one.
  [[nodiscard]] std::unique_ptr<CommWork> reduce_scatter_sum(at::Tensor& out, at::Tensor& in,
                                                             at::Tensor* scratch = nullptr);
  [[nodiscard]] std::unique_ptr<CommWork> all_gather_into(at::Tensor& out, at::Tensor& in, at::Tensor* scratch = nullptr);
  // Copies rank `root`'s tensors into every rank's, in place, and waits.
  void broadcast(const std::vector<at::Tensor>& tensors, int root = 0);
  void barrier();

  // The training step the ranks are at, named when a collective fails.
  void set_step(int64_t step) { step_ = step; }
  // While a save's meetings run (every rank entered it at the same step), a SIGTERM or SIGINT
  // does not end a wait: it is the stop that save is for, or one the loop takes after it. A
  // peer that died meanwhile is still caught: by the timeout, or the launcher's kill after its
  // grace. Otherwise a stop signal ends any wait at once (the launcher stops a job that lost a rank).
  void set_saving(bool saving) { saving_ = saving; }
  // Waits for a collective. A failure names the ranks that did not come (a roll call of the
  // live ranks through the store), the collective and the step.
  void finish(const c10::intrusive_ptr<c10d::Work>& work, const char* op);

 private:
  struct Impl;
  // Polls until `ready()` or the deadline; throws a refusal heard meanwhile, or a timeout
  // naming `missing()` (the ranks that did not come) and the meeting `what`.
  void wait_until(const std::function<bool()>& ready, const std::function<std::string()>& missing,
                  const std::string& what);
  [[noreturn]] void collective_failed(const std::string& op, const std::string& failure);
  // Rank 0 serving the store, after a refusal: stays until the ranks that came have heard it.
  void linger();
  RankEnv env_;
  double timeout_seconds_;
  int64_t step_ = 0;
  bool refused_ = false;  // this rank refused the job, or heard a refusal
  bool saving_ = false;   // set_saving
  std::unique_ptr<Impl> impl_;
};

}  // namespace gputrain
