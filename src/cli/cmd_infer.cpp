// `gputrain infer --checkpoint C --out preds.csv`: batched inference with throughput and latency,
// and `--batch_sizes 1,8,64,256` to sweep batch sizes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "config/merge.h"
#include "core/device_cuda.h"
#include "core/error.h"
#include "train/autocast.h"
#include "train/load_trained.h"

namespace gputrain {
namespace {

struct Pass {
  int64_t batch_size = 0, samples = 0;
  double seconds = 0;
  std::vector<double> latency_ms;  // per batch, from asking for it to its outputs being ready
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// One pass over the split; `rows` (when given) receives one CSV line per sample.
Pass run_pass(Trained& t, int64_t batch_size, std::ofstream* rows) {
  using Clock = std::chrono::steady_clock;
  torch::NoGradGuard no_grad;
  auto& model = t.trainer->model();
  model.eval();
  const auto& ctx = t.ctx;
  Loader loader(t.data.test, inference_loader_options(t, batch_size));
  Pass p;
  p.batch_size = batch_size;
  int64_t index = 0;
  loader.start_epoch(0);
  auto start = Clock::now();
  while (true) {
    auto t0 = Clock::now();
    auto b = loader.next();
    if (!b) break;
    torch::Tensor out;
    {
      AutocastGuard autocast(ctx.amp, ctx.device.type(), ctx.amp_dtype);
      out = model.forward(b->x).to(torch::kFloat);
    }
    // Latency needs the result: one sync per batch (inference, not the training loop).
    auto host = out.cpu();
    p.latency_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    p.samples += b->x.size(0);
    if (!rows) continue;
    auto y = b->y.cpu();
    const bool regression = y.scalar_type() != torch::kLong;
    auto probs = regression ? host : torch::softmax(host, 1);
    for (int64_t i = 0; i < host.size(0); ++i, ++index) {
      *rows << index;
      if (regression) {
        auto yi = y[i].reshape({-1}), oi = host[i].reshape({-1});
        for (int64_t k = 0; k < yi.numel(); ++k) *rows << "," << yi[k].item<float>();
        for (int64_t k = 0; k < oi.numel(); ++k) *rows << "," << oi[k].item<float>();
      } else {
        auto best = probs[i].max(0);
        *rows << "," << y[i].item<int64_t>() << "," << std::get<1>(best).item<int64_t>() << ","
              << std::get<0>(best).item<float>();
      }
      *rows << "\n";
    }
  }
  p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return p;
}

std::vector<int64_t> parse_batch_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  for (double v : parse_numbers(text)) {
    if (v < 1 || v > (1 << 20) || v != static_cast<double>(static_cast<int64_t>(v))) return {};
    sizes.push_back(static_cast<int64_t>(v));
  }
  return sizes;
}

}  // namespace

int cmd_infer(const std::vector<std::string>& words) {
  Args args = parse_config_args(words);
  if (args.take_switch("help")) {
    std::printf(
        "usage: gputrain infer --checkpoint FILE [--out preds.csv] [--batch_sizes 1,8,64,256] [train flags]\n\n"
        "Runs the model over the test split of its run's dataset (or the data the flags name)\n"
        "with the run's AMP and channels_last settings, on the GPU with the most free memory\n"
        "when there are several. Reports samples/s and per-batch latency p50/p99. --out writes\n"
        "one CSV row per sample: index, target, prediction (and the class probability).\n"
        "--batch_sizes sweeps batch sizes and prints a table.\n");
    return 0;
  }
  auto checkpoint = args.take_value("checkpoint");
  auto out_path = args.take_value("out");
  auto sweep_text = args.take_value("batch_sizes");
  if (!checkpoint || checkpoint->empty())
    throw usage_error("infer needs --checkpoint FILE",
                      "e.g. gputrain infer --checkpoint runs/<name>/checkpoints/best.pt");
  if (!args.positionals.empty()) throw usage_error("unexpected argument '" + args.positionals[0] + "' to infer");
  std::vector<int64_t> sweep;
  if (sweep_text) {
    sweep = parse_batch_sizes(*sweep_text);
    if (sweep.empty())
      throw usage_error("--batch_sizes '" + *sweep_text + "' (expected positive integers like 1,8,64,256)");
  }
  Trained t = load_trained(*checkpoint, args.flags);
  // A run with --ema_decay deploys its average (it chose best.pt by it).
  const bool ema = t.trainer->ema() != nullptr;
  if (ema) t.trainer->ema()->swap(t.trainer->model());
  std::ofstream rows;  // opened only now: a bad checkpoint must not truncate an existing file
  if (out_path) {
    rows.open(*out_path);
    if (!rows) throw usage_error("cannot write --out '" + *out_path + "'", "check that its folder exists");
    rows.precision(9);  // every float digit
  }
  std::printf("checkpoint: %s (%s weights)\ndata: %s\ndevice: %s, amp %s, channels_last %s\n", checkpoint->c_str(),
              ema ? "ema" : "raw", t.data.description.c_str(), t.ctx.device.str().c_str(), t.ctx.amp ? "on" : "off",
              t.ctx.channels_last ? "on" : "off");
  if (out_path) {
    const bool regression = t.data.test->is_regression();
    rows << "index";
    for (const char* part : {"target", "prediction"}) {
      if (!regression)
        rows << "," << part;
      else
        for (int64_t k = 0; k < t.data.test->target_numel(); ++k) rows << "," << part << "_" << k;
    }
    rows << (regression ? "\n" : ",probability\n");
  }
  // Warm-up (kernel selection, allocator) so the timed passes measure the steady state.
  run_pass(t, t.config.eval_batch_size, nullptr);
  if (sweep.empty()) sweep = {t.config.eval_batch_size};
  std::printf("%10s %14s %12s %12s\n", "batch", "samples/s", "p50 ms", "p99 ms");
  for (size_t i = 0; i < sweep.size(); ++i) {
    // The predictions are written once, during the last pass.
    Pass p = run_pass(t, sweep[i], out_path && i + 1 == sweep.size() ? &rows : nullptr);
    std::printf("%10lld %14.0f %12.3f %12.3f\n", static_cast<long long>(p.batch_size),
                p.seconds > 0 ? static_cast<double>(p.samples) / p.seconds : 0.0, percentile(p.latency_ms, 0.5),
                percentile(p.latency_ms, 0.99));
  }
  if (out_path) {
    rows.close();
    if (!rows) throw runtime_error("writing '" + *out_path + "' failed");
    std::printf("wrote %s (%lld rows)\n", out_path->c_str(), static_cast<long long>(t.data.test->size()));
  }
  return 0;
}

}  // namespace gputrain
