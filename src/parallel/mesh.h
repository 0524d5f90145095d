// Where this process sits in a job: its data-parallel rank (and the ranks' collectives) and the
// devices of its pipeline stages. One description, made once, read by everything that composes
// parallelism around the Session and the step (train/parallelism.h).
#pragma once
#include <memory>
#include <vector>

#include <torch/types.h>

#include "parallel/comm.h"
#include "parallel/rank_env.h"

namespace gputrain {

struct Mesh {
  RankEnv ranks;               // one rank of one when alone
  std::shared_ptr<Comm> comm;  // joined by the caller when ranks.world_size > 1; null alone
  // One device per pipeline stage this process runs (each a thread; GPUs, or the CPU for each);
  // empty without stages. Decided as the Session is built (train/parallelism.cpp), from
  // --pipeline_stages and the device.
  std::vector<torch::Device> stages;

  bool data_parallel() const { return ranks.world_size > 1; }
  bool pipelined() const { return stages.size() > 1; }
};

}  // namespace gputrain
