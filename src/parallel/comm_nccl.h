// ProcessGroupNCCL behind a function, so that its header (and NCCL's) is included in one file.
#pragma once
#include <chrono>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace gputrain {

// The NCCL backend for `device_index`; throws a runtime error where torch was built without it.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    int device_index, std::chrono::milliseconds timeout);

}  // namespace gputrain
