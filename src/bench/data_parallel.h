// `gputrain benchmark` with several ranks (gputrain launch, torchrun, srun): what data parallel
// buys over each rank training alone, how much of the all-reduce backward hides, and what
// sharding the state (--shard) costs in speed and saves in memory per rank.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench/runner.h"
#include "parallel/comm.h"

namespace gputrain {

struct DataParallelResult {
  std::string variant;           // the variant measured (the full recipe where it runs)
  std::vector<int64_t> batch;    // each rank's batch
  std::vector<double> alone;     // each rank's samples/s training alone (all at once, no all-reduce)
  std::vector<double> together;  // each rank's samples/s in the data-parallel job
  double global = 0;             // the job's samples/s: the sum of `together`
  double scaling_efficiency = 0; // global / the sum of `alone`
  double allreduce_ms = 0;       // per step, all-reduced in one bucket after backward: nothing hidden
  double exposed_ms = 0;         // per step, in --ddp_bucket_mb buckets during backward: the wait left
  double overlap = 0;            // 1 - exposed / allreduce: the share of communication backward hid
  double bucket_mb = 0;
  // --shard none, optimizer and gradients, the same job each in alternating rounds: the job's
  // samples/s (the median of its rounds, in order) and rank 0's training state (its optimizer's
  // state tensors, its gradients at their peak). Empty with pipeline stages (not sharded yet).
  struct Sharding {
    std::string shard;
    double samples_per_sec = 0;
    std::vector<double> rounds;
    int64_t optimizer_bytes = 0, gradient_bytes = 0;
  };
  std::vector<Sharding> sharding;
  // Pipeline stages in each rank (rank 0's): the bubble beside the all-reduce, which with stages
  // waits for the whole backward, so the two costs add up.
  std::optional<PipelineResult> pipeline;
};

// Every rank calls it at the same point, with the same variant. The all-reduce times are rank 0's
// (every rank waits about as long: the slowest rank sets the pace).
DataParallelResult measure_data_parallel(const Variant& v, std::shared_ptr<const DataSplits> data,
                                         const BenchSettings& s, const std::shared_ptr<Comm>& comm,
                                         const StepCallback& on_step);

std::string format_data_parallel(const DataParallelResult& r);
nlohmann::json to_json(const DataParallelResult& r);

}  // namespace gputrain
