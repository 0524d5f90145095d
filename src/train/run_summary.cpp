// The end of a training run: its "summary" record and its closing lines.
#include "train/run_summary.h"

#include <cstdio>

#include "core/text.h"

namespace gputrain {

nlohmann::json summary_record(const RunTotals& t, const std::string& monitored, double best_value,
                              const EvalResult& last_eval, const EvalResult& last_ema_eval) {
  const double sps =
      t.train_seconds > 0 ? static_cast<double>(t.steps_this_session * t.samples_per_step) / t.train_seconds : 0;
  nlohmann::json summary = {{"event", "summary"},
                            {"step", t.step},
                            {"epoch", t.epoch},
                            {"wall_seconds", t.wall_seconds},
                            {"train_seconds", t.train_seconds},
                            {"samples_per_sec", sps},
                            {"data_wait_fraction", t.train_seconds > 0 ? t.wait_seconds / t.train_seconds : 0.0},
                            {"skipped_steps", t.skipped_steps},
                            {"bad_samples", t.bad_samples}};
  summary["best_test_" + monitored] = best_value;
  if (last_eval.samples > 0) last_eval.add_to(summary, "final_test_");  // none when this session evaluated nothing
  if (last_ema_eval.samples > 0) last_ema_eval.add_to(summary, "final_test_ema_");
  return summary;
}

void print_telemetry(const nlohmann::json& mon) {
  if (mon.contains("mean_cpu_percent")) {
    std::printf("monitor: CPU %.0f%% of a core (mean), peak RSS %s", mon["mean_cpu_percent"].get<double>(),
                format_bytes(mon["peak_rss_bytes"].get<double>()).c_str());
    if (mon.contains("mean_gpu_util"))
      std::printf(" | GPU utilization %.0f%% mean, %.0f%% max | GPU memory peak %s | power %.0f W mean",
                  mon["mean_gpu_util"].get<double>(), mon["max_gpu_util"].get<double>(),
                  format_bytes(mon["peak_gpu_mem_used_bytes"].get<double>()).c_str(),
                  mon["mean_gpu_power_w"].get<double>());
    std::printf("\n");
  }
}

void print_summary(const nlohmann::json& summary, const std::string& monitored, const Config& c,
                   const std::string& out_dir) {
  std::string extra;
  if (int64_t skipped = summary["skipped_steps"].get<int64_t>())
    extra += " | " + std::to_string(skipped) + " overflow steps skipped";
  if (int64_t bad = summary["bad_samples"].get<int64_t>())
    extra += " | " + std::to_string(bad) + " bad samples skipped";
  std::printf("done: %lld steps in %s (training %s) | %.0f samples/s | best test %s %.4f | data wait %.1f%%%s\n",
              static_cast<long long>(summary["step"].get<int64_t>()),
              format_duration(summary["wall_seconds"].get<double>()).c_str(),
              format_duration(summary["train_seconds"].get<double>()).c_str(), summary["samples_per_sec"].get<double>(),
              monitored.c_str(), summary["best_test_" + monitored].get<double>(),
              100.0 * summary["data_wait_fraction"].get<double>(), extra.c_str());
  std::string files = out_dir + "/{config.json, metrics.jsonl, monitor.csv, report.html";
  if (c.save_checkpoints) files += ", checkpoints/";
  if (c.tensorboard) files += ", tensorboard/";
  files += "}";
  if (!c.export_path.empty()) files += ", " + c.export_path + " (weights, safetensors)";
  std::printf("files: %s\n", files.c_str());
}

}  // namespace gputrain
