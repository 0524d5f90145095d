// Data parallel: the gradients summed over the ranks in buckets, each launched from autograd
// as soon as backward has produced all of its gradients, so communication overlaps the rest of
// backward (as PyTorch's DDP does). Only the step's last micro-batch is armed: accumulation
// micro-batches communicate nothing. The buckets are kept from step to step, and each gradient
// is left as a view of its sum in its bucket (DDP's gradient_as_bucket_view).
//
// Sharded (ZeRO, parallel/shard_layout.h): each bucket is cut into one slice per rank and
// reduce-scattered, so a rank receives the summed gradients of its slice alone; the optimizer
// updates the slices (pieces()) and gather() all-gathers them back into every
// rank's parameters, in place: the parameters live in their bucket's buffer. Full gradients are freed as soon as their bucket is on its way (a copy
// travels until it is received). ShardMode::kOptimizer accumulates full gradients over a step's
// micro-batches and reduces on its last backward; kGradients reduces every backward and
// accumulates in the slices instead.
#pragma once
#include <memory>
#include <vector>

#include <torch/nn/module.h>

#include "parallel/comm.h"
#include "parallel/shard_layout.h"

namespace gputrain {

enum class ShardMode { kNone, kOptimizer, kGradients };

// Part of a parameter in this rank's slice: its elements [offset, offset + flat.numel()) in
// logical order (reshape(-1)), viewed in the slice; the gradient sum sets flat's .grad.
struct SlicePiece {
  at::Tensor param;
  int64_t offset = 0;
  at::Tensor flat;
};

class GradSync {
 public:
  // Buckets of up to `bucket_mb` MiB in reverse parameter order (the order backward produces
  // them); 0: one bucket, launched after backward (no overlap).
  GradSync(torch::nn::Module& model, Comm& comm, double bucket_mb, ShardMode shard = ShardMode::kNone);
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
  // had been launched in this step already, in any of its micro-batches (the other ranks' sums
  // then include them: no retry can undo it).
  bool disarm();

  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }

  // A step begins: nothing of it launched yet, and (sharded) the slices' gradient sums start
  // from zero.
  void begin_step();
  // kGradients: a micro-batch's backward is next; the previous one's buckets are waited for
  // and added to the slices first (settle()).
  void arm_micro();
  // kGradients: the last armed backward's buckets launched (those that never filled) and added
  // to the slices; nothing when none is armed.
  void settle();
  // This rank's pieces, for the optimizer to update (in bucket order).
  std::vector<SlicePiece> pieces() const;
  // The updated slices, all-gathered into every rank's parameters.
  void gather();
  // Another state kept per slice element (the EMA): buffers laid out as this rank's slices (one
  // per bucket, the padding zero), the pieces viewing them (pieces()' order), and every rank's
  // buffers gathered into `whole` (one tensor per parameter that trains, in the model's order).
  std::vector<at::Tensor> new_slices() const;
  std::vector<SlicePiece> pieces(const std::vector<at::Tensor>& slices) const;
  void gather(const std::vector<at::Tensor>& slices, const std::vector<at::Tensor>& whole);
  // Host seconds finish() waited for communication since the last call (what did not overlap).
  double take_wait_seconds();

 private:
  // kGradients' buffers for one bucket in flight, sized for the largest bucket.
  struct Staging {
    at::Tensor flat, received, scratch;
  };
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    size_t ready = 0;
    at::Tensor flat;
    std::unique_ptr<CommWork> work;
    // Sharded: the bucket's parameters end to end (padded), which the parameters view where
    // they can (views[j] for its j-th, undefined where it cannot), and this rank's slice of it
    // (the parameters' elements it updates), the
    // step's gradient sums of that slice (made by the first reduce-scatter), and one
    // reduce-scatter's result.
    // kOptimizer keeps flat, received and scratch (Gloo's receiving buffer) across steps, as
    // DDP keeps its buckets (the bytes of the bucket twice over on Gloo, once on NCCL): fresh
    // buffers of the bucket's size each step cost page faults (glibc returns them to the
    // system), which took the MLP of tools/compare_zero.py from 16 to 28 ms a step in `train`.
    // kGradients borrows them from a pool of two (staging): keeping a set per bucket would keep
    // the full gradients' bytes it exists to free.
    ShardLayout layout;
    at::Tensor full, slice, grad, received, scratch;
    bool summing = false;  // kGradients: grad holds this step's first sums
    Staging staging;  // kGradients: the pool's buffers flat, received and scratch view, while in flight
    std::vector<at::Tensor> views;
    std::vector<at::Tensor> flats;  // the segments' views of slice, one per layout segment: the optimizer's pieces
  };
  ShardMode shard_;
  std::vector<at::Tensor> params_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  Comm& comm_;
  bool armed_ = false;
  bool launched_ = false;  // a bucket went out since begin_step()
  size_t next_ = 0;  // the next bucket to launch: every rank launches them in the same order
  size_t settled_ = 0;  // buckets before it are received (sharded): [settled_, next_) are in flight
  // kGradients: buffers no bucket uses, and how many exist. Two at most, as DeepSpeed's ZeRO-2
  // double-buffers its reduction bucket: the backward fills one while the other travels (a
  // third would wait in the group's queue, which runs its collectives one at a time), and the
  // memory is two buckets' whatever the model's size.
  std::vector<Staging> spare_;
  size_t stagings_ = 0;
  static constexpr size_t kStagings = 2;
  bool hooked_ = false;
  double wait_seconds_ = 0;

  void ready(size_t param);
  void launch(Bucket& b);
  void collect();  // launches what is left and waits for every bucket
  void receive(Bucket& b);  // waits for b's reduce-scatter and adds it to the slice's sums
  void stage(Bucket& b);  // kGradients: b's buffers from the pool (waiting for the oldest bucket when both are out)
  // The bucket's j-th parameter still views b.full (nothing replaced its data since).
  bool in_bucket(const Bucket& b, size_t j) const;
};

}  // namespace gputrain
