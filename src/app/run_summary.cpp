// The end of a training run: its "summary" record and its closing lines.
#include "app/run_summary.h"

#include <fmt/format.h>

#include "core/stats.h"
#include "core/text.h"

namespace gputrain {

nlohmann::json summary_record(const RunTotals& t, const std::string& monitored, double best_value,
                              const EvalResult& last_eval, const EvalResult& last_ema_eval) {
  const double sps = unprofiled_samples_per_second(t.steps_this_session, t.train_seconds, t.samples_per_step,
                                                   t.profiled_steps, t.profiled_seconds);
  nlohmann::json summary = {{"event", "summary"},
                            {"step", t.step},
                            {"epoch", t.epoch},
                            {"wall_seconds", t.wall_seconds},
                            {"train_seconds", t.train_seconds},
                            {"samples_per_sec", sps},
                            {"data_wait_fraction", t.train_seconds > 0 ? t.wait_seconds / t.train_seconds : 0.0},
                            {"skipped_steps", t.skipped_steps},
                            {"bad_samples", t.bad_samples}};
  if (t.profiled_steps > 0) summary["profiled_steps"] = t.profiled_steps;
  summary["best_test_" + monitored] = best_value;
  if (last_eval.samples > 0) last_eval.add_to(summary, "final_test_");  // none when this session evaluated nothing
  if (last_ema_eval.samples > 0) last_ema_eval.add_to(summary, "final_test_ema_");
  return summary;
}

void print_telemetry(const nlohmann::json& mon) {
  if (mon.contains("mean_cpu_percent")) {
    fmt::print("monitor: CPU {:.0f}% of a core (mean), peak RSS {}", mon["mean_cpu_percent"].get<double>(),
               format_bytes(mon["peak_rss_bytes"].get<double>()));
    if (mon.contains("mean_gpu_util"))
      fmt::print(" | GPU utilization {:.0f}% mean, {:.0f}% max | GPU memory peak {} | power {:.0f} W mean",
                 mon["mean_gpu_util"].get<double>(), mon["max_gpu_util"].get<double>(),
                 format_bytes(mon["peak_gpu_mem_used_bytes"].get<double>()), mon["mean_gpu_power_w"].get<double>());
    fmt::print("\n");
  }
}

void print_summary(const nlohmann::json& summary, const std::string& monitored, const Config& c,
                   const std::string& out_dir) {
  std::string extra;
  if (int64_t skipped = summary["skipped_steps"].get<int64_t>())
    extra += fmt::format(" | {} overflow steps skipped", skipped);
  if (int64_t bad = summary["bad_samples"].get<int64_t>()) extra += fmt::format(" | {} bad samples skipped", bad);
  if (summary.contains("ended_by")) extra += " | ended by " + summary["ended_by"].get<std::string>();
  fmt::print("done: {} steps in {} (training {}) | {:.0f} samples/s | best test {} {:.4f} | data wait {:.1f}%{}\n",
             summary["step"].get<int64_t>(), format_duration(summary["wall_seconds"].get<double>()),
             format_duration(summary["train_seconds"].get<double>()), summary["samples_per_sec"].get<double>(),
             monitored, summary["best_test_" + monitored].get<double>(),
             100.0 * summary["data_wait_fraction"].get<double>(), extra);
  std::string files = out_dir + "/{config.json, metrics.jsonl, status.json, monitor.csv, report.html";
  if (c.save_checkpoints) files += ", checkpoints/";
  if (c.tensorboard) files += ", tensorboard/";
  files += "}";
  if (!c.export_path.empty()) files += ", " + c.export_path + " (weights, safetensors)";
  fmt::print("files: {}\n", files);
}

}  // namespace gputrain
