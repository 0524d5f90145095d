// Data parallel: the gradients summed over the ranks in buckets, each launched from autograd
// as soon as backward has produced all of its gradients, so communication overlaps the rest of
// backward (as PyTorch's DDP does). Only the step's last micro-batch is armed: accumulation
// micro-batches communicate nothing.
#pragma once
#include <memory>
#include <vector>

#include <torch/nn/module.h>

#include "parallel/comm.h"

namespace gputrain {

class GradSync {
 public:
  // Buckets of up to `bucket_mb` MiB in reverse parameter order (the order backward produces
  // them); 0: one bucket, launched after backward (no overlap).
  GradSync(torch::nn::Module& model, Comm& comm, double bucket_mb);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // The next backward is the step's last: launch each bucket as it fills.
  void arm();
  // After that backward: launches what is left (a parameter without a gradient counts as
  // zeros), waits for every bucket and writes the sums into the gradients. Without an arm (a
  // pipeline's backward, whose stage threads finish gradients in no fixed order) all go now.
  void finish();
  // A step that failed before finish(): no bucket launches from here on. Returns whether some
  // had been launched already (the other ranks' sums then include them: no retry can undo it).
  bool disarm();

  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  // Host seconds finish() waited for communication since the last call (what did not overlap).
  double take_wait_seconds();

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    size_t ready = 0;
    at::Tensor flat;
    std::unique_ptr<CommWork> work;
  };
  std::vector<at::Tensor> params_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  Comm& comm_;
  bool armed_ = false;
  size_t next_ = 0;  // the next bucket to launch: every rank launches them in the same order
  bool hooked_ = false;
  double wait_seconds_ = 0;

  void ready(size_t param);
  void launch(Bucket& b);
};

}  // namespace gputrain
