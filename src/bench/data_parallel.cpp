// The data-parallel measurement: three runs of one variant on every rank at once. Alone (no
// all-reduce) gives each rank's own speed; the job with one bucket after backward gives the
// all-reduce's whole time; the job with --ddp_bucket_mb buckets gives what backward left of it.
#include "bench/data_parallel.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "core/text.h"

namespace gputrain {
namespace {

// Every rank's `mine`, rank after rank: one all-reduce of a vector where each rank fills its slot
// (on the rank's device: NCCL reduces GPU tensors only).
std::vector<double> gather(Comm& comm, const std::vector<double>& mine, const std::string& device) {
  const size_t k = mine.size();
  std::vector<double> slots(k * static_cast<size_t>(comm.size()), 0.0);
  std::copy(mine.begin(), mine.end(), slots.begin() + static_cast<std::ptrdiff_t>(k * static_cast<size_t>(comm.rank())));
  auto t = torch::tensor(slots, torch::kDouble).to(torch::Device(device.rfind("cuda", 0) == 0 ? device : "cpu"));
  comm.all_reduce_sum(t)->wait();
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

}  // namespace

DataParallelResult measure_data_parallel(const Variant& v, std::shared_ptr<const DataSplits> data,
                                         const BenchSettings& s, const std::shared_ptr<Comm>& comm,
                                         const StepCallback& on_step) {
  DataParallelResult r;
  r.variant = v.name;
  r.bucket_mb = v.config.ddp_bucket_mb;
  Variant job = v;
  job.config.cuda_graphs = false;  // not with data parallel yet: the lone runs go without them too
  Variant one_bucket = job;
  one_bucket.config.ddp_bucket_mb = 0;
  const VariantResult whole = run_variant(one_bucket, data, s, on_step, comm);
  const VariantResult bucketed = run_variant(job, data, s, on_step, comm);
  // Alone: the batch this rank had in the job; all ranks start together, as they would train.
  Variant lone = job;
  lone.config.batch_size = bucketed.config.batch_size;
  lone.config.rank_batch_sizes.clear();
  lone.config.balance = "off";
  lone.config.device = bucketed.config.device;
  comm->barrier();
  const VariantResult alone = run_variant(lone, data, s, on_step);
  if (whole.interrupted || bucketed.interrupted || alone.interrupted) return r;
  // The same job with each --shard, in alternating rounds (none, optimizer, gradients; then
  // optimizer, gradients, none; ...): a CPU's speed drifts by 10-20% over a benchmark, more than sharding costs, so each
  // mode's figure is its median over rounds that met the same drift. After the lone runs: all
  // ranks start each job together.
  constexpr int kShardRounds = 3;
  const std::vector<std::string> modes = {"none", "optimizer", "gradients"};
  std::vector<std::vector<double>> shard_speeds(modes.size());  // the job's samples/s per round
  std::vector<VariantResult> shard_last(modes.size());
  if (!bucketed.pipeline && job.config.shard == "none")
    for (int round = 0; round < kShardRounds; ++round)
      for (size_t i = 0; i < modes.size(); ++i) {
        const size_t m = (i + static_cast<size_t>(round)) % modes.size();  // each mode goes first in one round
        Variant v_shard = job;
        v_shard.config.shard = modes[m];
        shard_last[m] = run_variant(v_shard, data, s, on_step, comm);
        if (shard_last[m].interrupted) return r;
        double sum = 0;
        for (double x : gather(*comm, {shard_last[m].samples_per_sec}, shard_last[m].config.device)) sum += x;
        shard_speeds[m].push_back(sum);
      }

  const auto all = gather(*comm, {static_cast<double>(bucketed.config.batch_size), alone.samples_per_sec,
                                  bucketed.samples_per_sec, whole.comm_ms, bucketed.comm_ms},
                          bucketed.config.device);
  double alone_sum = 0;
  for (int rank = 0; rank < comm->size(); ++rank) {
    const double* f = all.data() + 5 * rank;
    r.batch.push_back(static_cast<int64_t>(f[0]));
    r.alone.push_back(f[1]);
    r.together.push_back(f[2]);
    alone_sum += f[1];
    r.global += f[2];
  }
  r.scaling_efficiency = alone_sum > 0 ? r.global / alone_sum : 0;
  r.allreduce_ms = all[3];
  r.exposed_ms = all[4];
  r.overlap = r.allreduce_ms > 0 ? std::clamp(1.0 - r.exposed_ms / r.allreduce_ms, 0.0, 1.0) : 0;
  r.pipeline = bucketed.pipeline;
  for (size_t m = 0; m < modes.size() && !shard_speeds[m].empty(); ++m) {
    auto sorted = shard_speeds[m];
    std::sort(sorted.begin(), sorted.end());
    r.sharding.push_back({modes[m], sorted[sorted.size() / 2], shard_speeds[m], shard_last[m].optimizer_state_bytes,
                          shard_last[m].gradient_bytes});
  }
  return r;
}

std::string format_data_parallel(const DataParallelResult& r) {
  std::string out = fmt::format("data parallel ({}, {} ranks):\n", r.variant, r.batch.size());
  for (size_t i = 0; i < r.batch.size(); ++i)
    out += fmt::format("  rank {}: batch {} | {:.0f} samples/s in the job | {:.0f} samples/s alone\n", i, r.batch[i],
                       r.together[i], r.alone[i]);
  out += fmt::format(
      "  job {:.0f} samples/s | scaling efficiency {:.0f}% | all-reduce {:.2f} ms/step, {:.2f} ms exposed with "
      "{:g} MiB buckets ({:.0f}% overlapped with backward)\n",
      r.global, 100.0 * r.scaling_efficiency, r.allreduce_ms, r.exposed_ms, r.bucket_mb, 100.0 * r.overlap);
  for (const auto& m : r.sharding) {
    const double base = r.sharding.front().samples_per_sec;
    std::vector<std::string> rounds;
    for (double x : m.rounds) rounds.push_back(fmt::format("{:.0f}", x));
    out += fmt::format("  --shard {:<9} {:.0f} samples/s{} (rounds {}) | on rank 0: optimizer state {}, gradients {}\n",
                       m.shard, m.samples_per_sec,
                       m.shard == "none" || base <= 0 ? std::string()
                                                      : fmt::format(" ({:+.1f}%)", 100.0 * (m.samples_per_sec / base - 1)),
                       join(rounds, " "),
                       format_bytes(static_cast<double>(m.optimizer_bytes)), format_bytes(static_cast<double>(m.gradient_bytes)));
  }
  if (r.pipeline) {
    const PipelineResult& p = *r.pipeline;
    std::vector<std::string> busy;
    for (double b : p.busy) busy.push_back(fmt::format("{:.0f}%", 100 * b));
    out += fmt::format("  stages in each rank: {} x {} micro-batches, {}: bubble {:.1f}% measured, {:.1f}% theoretical; "
                       "busy by stage {}; then the gradient all-reduce, {:.2f} ms/step\n",
                       p.stages, p.micro_batches, p.schedule, 100 * p.bubble, 100 * p.theoretical, join(busy, " "),
                       r.exposed_ms);
  }
  return out;
}

nlohmann::json to_json(const DataParallelResult& r) {
  return {{"variant", r.variant},
          {"world_size", r.batch.size()},
          {"rank_batch_sizes", r.batch},
          {"samples_per_sec_per_rank", r.together},
          {"samples_per_sec_alone_per_rank", r.alone},
          {"samples_per_sec", r.global},
          {"scaling_efficiency", r.scaling_efficiency},
          {"allreduce_ms_per_step", r.allreduce_ms},
          {"exposed_allreduce_ms_per_step", r.exposed_ms},
          {"overlap_fraction", r.overlap},
          {"ddp_bucket_mb", r.bucket_mb},
          {"sharding", [&] {
             nlohmann::json rows = nlohmann::json::array();
             for (const auto& m : r.sharding)
               rows.push_back({{"shard", m.shard},
                               {"samples_per_sec", m.samples_per_sec},
                               {"samples_per_sec_rounds", m.rounds},
                               {"optimizer_state_bytes_rank0", m.optimizer_bytes},
                               {"gradient_bytes_rank0", m.gradient_bytes}});
             return rows;
           }()},
          {"pipeline", r.pipeline ? nlohmann::json{{"stages", r.pipeline->stages},
                                                   {"micro_batches", r.pipeline->micro_batches},
                                                   {"schedule", r.pipeline->schedule},
                                                   {"bubble", r.pipeline->bubble},
                                                   {"theoretical_bubble", r.pipeline->theoretical},
                                                   {"busy", r.pipeline->busy}}
                                  : nlohmann::json()}};
}

}  // namespace gputrain
