// Parallelism's side of the fit loop (parallelism.h): what the ranks agree on at log steps and
// saves, and what the metrics record of the run's layout.
#include "train/parallelism.h"

#include <cmath>

#include <fmt/format.h>

#include "parallel/pipeline.h"

namespace gputrain {

StopReason Parallelism::agree_stop(const StopReason& local, int64_t& every) const {
  if (!mesh_.data_parallel()) return local;
  // One all-reduce: the reasons any rank has, and rank 0's interval (the others add 0).
  using Kind = StopReason::Kind;
  auto flags = torch::zeros({4}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  if (local.kind == Kind::kSigterm) flags[0] = 1;
  if (local.kind == Kind::kSigint) flags[1] = 1;
  if (local.kind == Kind::kTimeLimit) flags[2] = 1;
  if (mesh_.ranks.rank == 0) flags[3] = static_cast<double>(every);
  mesh_.comm->all_reduce_sum(flags)->wait();
  const auto f = flags.cpu();
  every = std::max<int64_t>(1, static_cast<int64_t>(f[3].item<double>()));
  // Another rank's time limit is named with this rank's --time_limit (ranks start with the same flags).
  if (f[0].item<double>() > 0) return {Kind::kSigterm};
  if (f[1].item<double>() > 0) return {Kind::kSigint};
  if (f[2].item<double>() > 0) return {Kind::kTimeLimit, time_limit_};
  return {};
}

bool Parallelism::any(bool local) const {
  if (!mesh_.data_parallel()) return local;
  auto flag = torch::full({1}, local ? 1.0f : 0.0f, torch::TensorOptions().device(device_));
  mesh_.comm->all_reduce_sum(flag)->wait();
  return flag.item<float>() > 0;
}

double Parallelism::log_window(const torch::Tensor& loss_sum, int64_t window_steps, int64_t batch_size,
                               double step_ms, nlohmann::json& record, std::string& tail) const {
  const double steps = static_cast<double>(window_steps);
  double loss = 0;
  if (mesh_.data_parallel()) {
    // One all-reduce carries the loss (each rank's weighted by its share of the global batch: the
    // sum is the job's) and every rank's batch, step time and wait for the others.
    const int world = mesh_.ranks.world_size, me = mesh_.ranks.rank;
    std::vector<double> mine(static_cast<size_t>(3 * world), 0.0);
    mine[3 * me] = static_cast<double>(batch_size);
    mine[3 * me + 1] = step_ms;
    mine[3 * me + 2] = 1000.0 * take_comm_seconds() / steps;
    auto all = torch::cat({loss_sum.reshape({1}).to(torch::kDouble), torch::tensor(mine, torch::kDouble).to(loss_sum.device())});
    mesh_.comm->all_reduce_sum(all)->wait();
    all = all.cpu();
    const auto* v = all.data_ptr<double>();
    loss = v[0] / steps;
    nlohmann::json ranks;
    tail = " | batch/wait ms by rank:";
    for (int r = 0; r < world; ++r) {
      const double* f = v + 1 + 3 * r;
      ranks.push_back({{"rank", r}, {"batch", std::llround(f[0])}, {"step_ms", f[1]}, {"allreduce_ms", f[2]}});
      tail += fmt::format(" {}/{:.1f}", std::llround(f[0]), f[2]);
    }
    record["allreduce_ms"] = ranks[me]["allreduce_ms"];
    record["ranks"] = ranks;
  } else {
    loss = loss_sum.item<double>() / steps;
  }
  // Pipeline stages: how busy each stage was in the last step, and the bubble.
  if (pipeline_) {
    const PipelineStats& st = pipeline_->last_stats();
    std::vector<double> busy;
    tail += " | busy by stage:";
    for (double b : st.busy_seconds) {
      busy.push_back(st.seconds > 0 ? b / st.seconds : 0.0);
      tail += fmt::format(" {:.0f}%", 100 * busy.back());
    }
    record["pipeline"] = {{"busy", busy}, {"bubble", st.bubble()}, {"peak_bytes", st.peak_bytes},
                          {"stage_peak_bytes", st.stage_peak_bytes}};
  }
  return loss;
}

void Parallelism::gather_rng(CheckpointMeta& meta, const Trainer& trainer) const {
  if (mesh_.data_parallel()) meta.rank_rng = gather_rank_rng(*mesh_.comm, trainer);
}

nlohmann::json Parallelism::layout_record(Trainer& trainer, const std::string& schedule) const {
  if (!pipeline_) return nullptr;
  // What the report's stage table shows.
  const auto& o = pipeline_->options();
  const Pieces& pieces = trainer.model().pieces();
  nlohmann::json stages = nlohmann::json::array();
  for (size_t i = 0; i < o.stages.size(); ++i) {
    const Stage& st = o.stages[i];
    stages.push_back({{"stage", i},
                      {"device", st.device.str()},
                      {"first", pieces[st.begin].name},
                      {"last", pieces[st.end - 1].name},
                      {"parameters", stage_parameters(pieces, st)}});
  }
  return {{"event", "pipeline"}, {"micro_batches", o.micro_batches}, {"schedule", schedule}, {"stages", stages},
          {"theoretical_bubble", theoretical_bubble(static_cast<int64_t>(o.stages.size()), o.micro_batches)}};
}

}  // namespace gputrain
