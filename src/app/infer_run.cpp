// `gputrain infer`: the model over a split in order, with samples/s, per-batch latency and the
// predictions as CSV.
#include "app/infer_run.h"

#include <chrono>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/output_paths.h"
#include "core/stats.h"
#include "core/text.h"
#include "core/autocast.h"
#include "data/csv.h"
#include "data/schema.h"
#include "step/loss.h"
#include "weights/safetensors.h"
#include "app/load_trained.h"
#include "train/run_program.h"
#include "train/utilization.h"

namespace gputrain {
namespace {

struct Pass {
  int64_t batch_size = 0, samples = 0;
  double seconds = 0;
  std::vector<double> latency_ms;  // per batch, from asking for it to its outputs being ready
  int64_t peak_memory_bytes = 0;   // GPU: the caching allocator's peak; CPU: peak RSS
};

// The names of a multi-label model's labels: the data's, or label_0, label_1, ...
std::vector<std::string> label_columns(const Dataset& test) {
  if (const auto* names = test.label_names(); names && static_cast<int64_t>(names->size()) == test.num_classes()) return *names;
  std::vector<std::string> out;
  for (int64_t k = 0; k < test.num_classes(); ++k) out.push_back(fmt::format("label_{}", k));
  return out;
}

// A class per token: one row per counted token (its label not -100), with its position.
void append_token_rows(std::string& csv, int64_t& index, const torch::Tensor& out, const torch::Tensor& target) {
  const auto y = target.cpu();
  const auto [prob, best] = torch::softmax(out, -1).max(-1);
  const auto ys = y.accessor<int64_t, 2>();
  const auto ps = prob.accessor<float, 2>();
  const auto bs = best.accessor<int64_t, 2>();
  for (int64_t i = 0; i < out.size(0); ++i, ++index)
    for (int64_t t = 0; t < ys.size(1); ++t)
      if (ys[i][t] != kIgnoreIndex) csv += fmt::format("{},{},{},{},{:.9g}\n", index, t, ys[i][t], bs[i][t], ps[i][t]);
}

// Several labels per sample: each label's target and probability (sigmoid), then the names of
// the labels predicted on (probability above 0.5), joined by '|'.
void append_multilabel_rows(std::string& csv, int64_t& index, const torch::Tensor& out, const torch::Tensor& target,
                            const std::vector<std::string>& names) {
  const auto y = target.cpu().contiguous(), p = torch::sigmoid(out).contiguous();
  const auto ys = y.accessor<float, 2>(), ps = p.accessor<float, 2>();
  for (int64_t i = 0; i < out.size(0); ++i, ++index) {
    csv += std::to_string(index);
    std::vector<std::string> on;
    for (int64_t k = 0; k < ps.size(1); ++k) {
      csv += fmt::format(",{:g},{:.9g}", ys[i][k], ps[i][k]);
      if (ps[i][k] > 0.5f) on.push_back(names[static_cast<size_t>(k)]);
    }
    csv += "," + csv_field(join(on, "|")) + "\n";
  }
}

// One CSV row per sample: index, target(s), prediction(s) and, for classes, its probability and,
// where the data names its classes, the predicted class's name.
void append_rows(std::string& csv, int64_t& index, const torch::Tensor& out, const torch::Tensor& target,
                 const Dataset& test) {
  if (per_token(target)) return append_token_rows(csv, index, out, target);
  const auto* names = test.label_names();
  if (test.multilabel()) return append_multilabel_rows(csv, index, out, target, label_columns(test));
  auto y = target.cpu();
  const bool regression = y.scalar_type() != torch::kLong;
  auto probs = regression ? out : torch::softmax(out, 1);
  for (int64_t i = 0; i < out.size(0); ++i, ++index) {
    csv += std::to_string(index);
    if (regression) {
      auto yi = y[i].reshape({-1}).contiguous(), oi = out[i].reshape({-1}).contiguous();
      for (int64_t k = 0; k < yi.numel(); ++k) csv += fmt::format(",{:.9g}", yi[k].item<float>());
      for (int64_t k = 0; k < oi.numel(); ++k) csv += fmt::format(",{:.9g}", oi[k].item<float>());
    } else {
      auto best = probs[i].max(0);
      const int64_t predicted = std::get<1>(best).item<int64_t>();
      csv += fmt::format(",{},{},{:.9g}", y[i].item<int64_t>(), predicted, std::get<0>(best).item<float>());
      if (names) csv += "," + csv_field(predicted < static_cast<int64_t>(names->size()) ? (*names)[static_cast<size_t>(predicted)] : "");
    }
    csv += '\n';
  }
}

// One pass over the test split under InferenceMode; `csv` (when given) receives the rows.
Pass run_pass(Session& s, int64_t batch_size, std::string* csv) {
  using Clock = std::chrono::steady_clock;
  c10::InferenceMode inference;
  auto& model = s.trainer().model();
  model.eval();
  const Recipe& r = s.recipe();
  Loader loader(s.data().test, s.eval_loader_options(batch_size));
  Pass p;
  p.batch_size = batch_size;
  int64_t index = 0;
  loader.start_epoch(0);
  reset_memory_peaks(r);
  const auto start = Clock::now();
  while (true) {
    const auto t0 = Clock::now();
    auto b = loader.next();
    if (!b) break;
    torch::Tensor out;
    {
      AutocastGuard autocast(r.precision.amp, r.device.type(), r.precision.dtype);
      out = model.forward_batch(*b).to(torch::kFloat);
    }
    // Latency needs the result: one sync per batch (inference, not the training loop).
    auto host = out.cpu();
    p.latency_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    p.samples += b->samples();
    if (csv) append_rows(*csv, index, host, b->y(), *s.data().test);
  }
  p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  p.peak_memory_bytes = peak_memory_bytes(r);
  return p;
}

std::string csv_header(const Dataset& test) {
  if (test.multilabel()) {
    std::string h = "index";
    for (const auto& name : label_columns(test)) h += "," + csv_field(name + "_target") + "," + csv_field(name + "_probability");
    return h + ",prediction\n";
  }
  if (test.named_fields() && !test.named_fields()->find(test.named_fields()->target)->shape.empty() && !test.is_regression())
    return "index,position,target,prediction,probability\n";
  const bool regression = test.is_regression();
  std::string h = "index";
  for (const char* part : {"target", "prediction"}) {
    if (!regression)
      h += fmt::format(",{}", part);
    else
      for (int64_t k = 0; k < test.target_numel(); ++k) h += fmt::format(",{}_{}", part, k);
  }
  return h + (regression ? "\n" : test.label_names() ? ",probability,class\n" : ",probability\n");
}

}  // namespace

int run_infer(const InferRequest& q) {
  const PathFlag out{"--out", q.out_path.value_or("")};
  refuse_outputs_over_inputs({out}, {{"--checkpoint", q.checkpoint}});
  if (holds_run(run_dir_of(q.checkpoint))) refuse_output_in_run(out, run_dir_of(q.checkpoint));
  if (q.out_path) check_writable(*q.out_path, "--out file");  // now, not after the passes
  Trained t = load_trained(q.checkpoint, q.flags);
  Session& s = *t.session;
  refuse_outputs_over_inputs({out}, input_files(s.config(), true));  // the data it reads
  // A run with --ema_decay deploys its average (it chose best.pt by it).
  const bool ema = s.trainer().ema() != nullptr;
  if (ema) s.trainer().ema()->swap(s.trainer().model());
  fmt::print("checkpoint: {} ({} weights)\ndata: {}\nsession: {}\n", q.checkpoint, ema ? "ema" : "raw",
             s.data().description, s.describe_line());
  // Warm-up (kernel selection, allocator) so the timed passes measure the steady state.
  run_pass(s, s.config().eval_batch_size, nullptr);
  const std::vector<int64_t> sweep =
      q.batch_sizes.empty() ? std::vector<int64_t>{s.config().eval_batch_size} : q.batch_sizes;
  std::string csv = csv_header(*s.data().test);
  fmt::print("{:>10} {:>14} {:>12} {:>12} {:>14}\n", "batch", "samples/s", "p50 ms", "p99 ms",
             s.recipe().cuda ? "peak GPU mem" : "peak RSS");
  for (size_t i = 0; i < sweep.size(); ++i) {
    // The predictions are kept once, from the last pass.
    Pass p = run_pass(s, sweep[i], q.out_path && i + 1 == sweep.size() ? &csv : nullptr);
    fmt::print("{:>10} {:>14.0f} {:>12.3f} {:>12.3f} {:>14}\n", p.batch_size,
               samples_per_second(static_cast<double>(p.samples), p.seconds), percentile(p.latency_ms, 0.5),
               percentile(p.latency_ms, 0.99), format_bytes(static_cast<double>(p.peak_memory_bytes)));
  }
  if (q.out_path) {
    write_file_atomically(*q.out_path, csv);
    fmt::print("wrote {} ({} rows)\n", *q.out_path, s.data().test->size());
  }
  return 0;
}

}  // namespace gputrain
