// Pipeline stages (--pipeline_stages): a model's pieces cut into consecutive stages, each on its
// own device and run by its own thread, with the batch split into micro-batches that flow through
// them on a GPipe or 1F1B schedule.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <torch/types.h>

#include "core/pieces.h"
#include "core/precision.h"

namespace gputrain {

// GPipe: every forward, then every backward (all micro-batches' activations alive at once).
// 1F1B: after a warm-up of (stages - stage - 1) forwards, one forward then one backward, so a
// stage holds at most `stages` micro-batches' activations.
enum class PipelineSchedule { kGpipe, k1f1b };

struct MemoryCounts;  // pipeline.cpp

struct Stage {
  size_t begin = 0, end = 0;  // pieces [begin, end) of the model
  torch::Device device = torch::kCPU;
};

struct PipelineOptions {
  std::vector<Stage> stages;
  int64_t micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::k1f1b;
  int threads_per_stage = 1;  // intra-op threads of each stage's thread
  // The run's precision (null: fp32), read at every forward: each stage thread sets autocast
  // from it (autocast's state is per thread), so a fallback mid-run reaches the stages too.
  const Precision* precision = nullptr;
};

// What one run() measured.
struct PipelineStats {
  double seconds = 0;                // wall time of the run
  std::vector<double> busy_seconds;  // per stage: time in its forwards and backwards (GPU: CUDA events)
  int64_t peak_bytes = 0;            // the most bytes the run's allocations held at once
  std::vector<int64_t> stage_peak_bytes;  // the same, by the stage that allocated them

  // The fraction of stage time spent idle: 1 - busy / (stages x wall time).
  double bubble() const;
};

// GPipe's and 1F1B's idle fraction with equal stages and no transfer cost: (N - 1) / (M + N - 1).
double theoretical_bubble(int64_t stages, int64_t micro_batches);

// The cut points for `stages` stages over pieces of these costs (parameter counts or measured
// times): consecutive ranges, none empty, with the largest stage cost as small as possible.
std::vector<Stage> cut_stages(const std::vector<double>& piece_costs, int stages);

// --pipeline_stages: cuts the pieces of model `name` into one stage per device by `costs` per
// piece (empty: parameter counts) and moves each stage's pieces to its device. A usage error when
// the model has fewer pieces than stages.
std::vector<Stage> split_model(const Pieces& pieces, const std::string& name, const std::vector<torch::Device>& devices,
                               std::vector<double> costs = {});

// --stage_balance time: each piece's forward and backward seconds on `x` (the median of 3 runs
// after a warm-up, each piece on its own detached input), on the model's device. The caller
// keeps the buffers and random generators; the parameters' gradients are left for it to clear.
std::vector<double> piece_seconds(const Pieces& pieces, const torch::Tensor& x);

// The parameters (trainable tensors' elements) of a stage's pieces.
int64_t stage_parameters(const Pieces& pieces, const Stage& stage);

// One line for the device report: "cpu fc1-fc2 (8,448 parameters) | cpu fc3 (330 parameters)".
std::string describe_stages(const Pieces& pieces, const std::vector<Stage>& stages);

class Pipeline {
 public:
  Pipeline(const Pieces& pieces, PipelineOptions options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The last stage turns a micro-batch's output and targets into its loss (weighted by the
  // caller), and backward starts from scale(loss) (the grad scaler's).
  using LossFn = std::function<torch::Tensor(const torch::Tensor& out, const torch::Tensor& y)>;
  using ScaleFn = std::function<torch::Tensor(const torch::Tensor& loss)>;

  // Forward and backward of (x, y) cut into micro-batches; the parameters' gradients accumulate
  // over them as in one device's accumulation. Returns the sum of the micro-batch losses
  // (detached, on the last stage's device). A stage's error stops the others and is rethrown.
  torch::Tensor run(const torch::Tensor& x, const torch::Tensor& y, const LossFn& loss, const ScaleFn& scale);

  // Moves each stage's pieces to its device again (after a checkpoint load put them elsewhere).
  void place();
  const PipelineOptions& options() const { return opt_; }
  const PipelineStats& last_stats() const { return stats_; }
  // The runs since the last call added up (seconds and busy seconds summed, peaks the largest).
  PipelineStats take_totals();

 private:
  struct Job {
    const std::vector<torch::Tensor>* xs = nullptr;
    const std::vector<torch::Tensor>* ys = nullptr;
    const LossFn* loss = nullptr;
    const ScaleFn* scale = nullptr;
    std::shared_ptr<MemoryCounts> counts;  // the run's allocations, counted in every stage thread
  };

  const Pieces& pieces_;
  PipelineOptions opt_;
  PipelineStats stats_, totals_;
  std::vector<std::thread> threads_;

  // Work handed to the stage threads, one generation per run().
  std::mutex mu_;
  std::condition_variable cv_;
  Job job_;
  int64_t generation_ = 0;
  int done_ = 0;
  bool quit_ = false;
  bool aborted_ = false;  // a stage failed: the others stop waiting
  std::vector<std::exception_ptr> errors_;
  // Tensors between stages: (direction, from stage, micro-batch) -> tensor. Direction 0 carries
  // activations forward, 1 carries their gradients back.
  std::map<std::tuple<int, int, int64_t>, torch::Tensor> mail_;
  std::vector<torch::Tensor> losses_;  // per micro-batch, from the last stage

  void worker(int stage);
  void run_stage(int stage, const Job& job);
  void send(int direction, int from, int64_t micro, torch::Tensor t);
  torch::Tensor receive(int direction, int from, int64_t micro);
};

}  // namespace gputrain
