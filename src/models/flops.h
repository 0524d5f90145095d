// Model FLOPs for MFU: the matrix products and convolutions of a forward pass, counted from the
// operators that actually run (RecordFunction observers), so every model family is covered
// without a formula per layer. Elementwise work (activations, norms) is left out, as MFU
// conventions do.
#pragma once
#include <cstdint>
#include <memory>

namespace gputrain {

// Counts, while it lives, the FLOPs (2 per multiply-add) of aten::mm, addmm, bmm, baddbmm,
// convolution and scaled_dot_product_attention run on this thread; the operators such a kernel
// calls inside are not counted again.
class FlopCounter {
 public:
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;
  double flops() const;

 private:
  uint64_t handle_;
};

// Training FLOPs per sample from the forward's: the backward computes two products (input and
// weight gradients) per forward product.
inline double training_flops(double forward_flops) { return 3.0 * forward_flops; }

}  // namespace gputrain
