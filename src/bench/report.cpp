// Benchmark output: the aligned table, and the same results as JSON, CSV and Markdown.
#include "bench/report.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/text.h"

namespace gputrain {
namespace {

const std::vector<std::string> kHeader = {"Optimization", "samples/s",     "Speedup",   "Median ms", "p90 ms",
                                          "Peak memory",  "Memory saving", "Data wait", "Loss"};

// --until: the time to the target first; the figures are medians over the seeds.
const std::vector<std::string> kTargetHeader = {"Optimization", "To target", "Speedup", "Worst seed", "Steps",
                                                "Epochs",       "Reached",   "Final",   "Eval s",     "samples/s"};

// A speed with three significant digits below 100 (a 124M GPT on a CPU trains 0.12 samples/s),
// whole numbers above.
std::string rate(double per_sec) { return per_sec >= 100 ? fmt::format("{:.0f}", per_sec) : fmt::format("{:.3g}", per_sec); }

// A language model's samples are windows of tokens: its speed is also given in tokens/s, the
// unit llm.c and nanoGPT report.
int64_t tokens_per_sample(const VariantResult& v) { return v.config.dataset == "tokens" ? v.config.seq_len : 0; }
bool in_tokens(const BenchReport& r) {
  return !r.settings.until && !r.results.empty() && tokens_per_sample(r.results.front()) > 0;
}

std::vector<std::string> header(const BenchReport& r) {
  if (r.settings.until) return kTargetHeader;
  auto h = kHeader;
  if (in_tokens(r)) h.insert(h.begin() + 2, "tokens/s");
  return h;
}

// Two decimals below 10 s, where a tenth would round short races to 0.0 s.
std::string seconds_or_never(double s) {
  if (!std::isfinite(s)) return "not reached";
  return s < 10 ? fmt::format("{:.2f} s", s) : fmt::format("{:.1f} s", s);
}

std::vector<std::string> target_cells(const VariantResult& v) {
  const TargetResult& t = *v.target;
  const int64_t n = static_cast<int64_t>(t.runs.size());
  return {v.name,
          seconds_or_never(t.seconds),
          t.speedup > 0 ? fmt::format("{:.2f}x", t.speedup) : "-",
          seconds_or_never(t.worst_seconds),
          std::isfinite(t.steps) ? fmt::format("{:.0f}", t.steps) : "-",
          std::isfinite(t.epochs) ? fmt::format("{:.2f}", t.epochs) : "-",
          fmt::format("{}/{}", t.reached_count, n),
          std::isfinite(t.metric) ? fmt::format("{:.4f}", t.metric) : "-",
          fmt::format("{:.1f}", t.eval_seconds),
          fmt::format("{:.0f}", t.samples_per_sec)};
}

// One row of cells per variant; a skipped variant says why in the second cell.
std::vector<std::vector<std::string>> cells(const BenchReport& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : r.results) {
    if (!v.skipped.empty()) {
      rows.push_back({v.name, "skipped: " + v.skipped});
      continue;
    }
    if (v.target) {
      rows.push_back(target_cells(v));
      continue;
    }
    std::string loss = std::isfinite(v.loss) ? fmt::format("{:.4f}", v.loss) : "-";
    if (v.loss_drift) loss += " (drift!)";
    rows.push_back({v.name, rate(v.samples_per_sec), fmt::format("{:.2f}x", v.speedup),
                    fmt::format("{:.2f}", v.median_ms), fmt::format("{:.2f}", v.p90_ms),
                    format_bytes(static_cast<double>(v.peak_memory_bytes)),
                    fmt::format("{:+.1f}%", 100.0 * v.memory_saving),
                    fmt::format("{:.1f}%", 100.0 * v.data_wait_fraction), loss});
    if (in_tokens(r))
      rows.back().insert(rows.back().begin() + 2,
                         rate(v.samples_per_sec * static_cast<double>(tokens_per_sample(v))));
  }
  return rows;
}

// "pipeline (baseline): 2 stages x 8 micro-batches, 1f1b: bubble 21.3% measured, 11.1% theoretical;
// busy by stage 81% 74%", one line per variant that ran with stages.
std::string format_pipeline(const BenchReport& r) {
  std::string out;
  for (const auto& v : r.results) {
    if (!v.pipeline) continue;
    const PipelineResult& p = *v.pipeline;
    std::vector<std::string> busy;
    for (double b : p.busy) busy.push_back(fmt::format("{:.0f}%", 100 * b));
    out += fmt::format("pipeline ({}): {} stages x {} micro-batches, {}: bubble {:.1f}% measured, {:.1f}% theoretical; "
                       "busy by stage {}\n",
                       v.name, p.stages, p.micro_batches, p.schedule, 100 * p.bubble, 100 * p.theoretical, join(busy, " "));
  }
  return out;
}

}  // namespace

std::string format_table(const BenchReport& r) {
  const auto& columns = header(r);
  auto rows = cells(r);
  std::vector<size_t> width;
  for (const auto& h : columns) width.push_back(h.size());
  for (const auto& row : rows) {
    width[0] = std::max(width[0], row[0].size());
    if (row.size() == columns.size())
      for (size_t i = 1; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (size_t i = 0; i < row.size(); ++i) {
      std::string cell = row[i];
      bool last = i + 1 == row.size();
      // Numbers right-aligned, names left-aligned; a skip reason runs to the end of the line.
      if (!last && i > 0)
        cell = std::string(width[i] - std::min(width[i], cell.size()), ' ') + cell;
      else if (!last)
        cell += std::string(width[i] - std::min(width[i], cell.size()), ' ');
      s += (i ? " | " : "") + cell;
    }
    return s + "\n";
  };
  std::string out = line(columns);
  size_t total = 0;
  for (size_t w : width) total += w + 3;
  out += std::string(total - 3, '-') + "\n";
  for (const auto& row : rows) out += line(row);
  if (r.settings.until)
    out += fmt::format("time to {}: training time from the first step to the evaluation that reached it, evaluations "
                       "excluded (Eval s); median over {} seed(s); Final: the metric at the last evaluation\n",
                       r.settings.until->text(), r.settings.seeds);
  else
    out += fmt::format("memory: {}; timed {} x {} steps after {} warm-up steps; stage {}\n", r.memory_kind,
                       r.settings.repeats, r.settings.steps, r.settings.warmup_steps, r.settings.stage);
  if (!r.verdict.empty()) out += r.verdict + "\n";
  if (!r.explain.empty()) out += r.explain + "\n";
  if (r.data_parallel) out += format_data_parallel(*r.data_parallel);
  out += format_pipeline(r);
  return out;
}

std::string format_markdown(const BenchReport& r) {
  const auto& columns = header(r);
  std::string out = "| " + join(columns, " | ") + " |\n|";
  for (size_t i = 0; i < columns.size(); ++i) out += i == 0 ? "---|" : "---:|";
  out += "\n";
  for (auto row : cells(r)) {
    row.resize(columns.size());
    out += "| " + join(row, " | ") + " |\n";
  }
  if (!r.verdict.empty()) out += "\n" + r.verdict + "\n";
  if (!r.explain.empty()) out += "\n" + r.explain + "\n";
  if (r.data_parallel) out += "\n```\n" + format_data_parallel(*r.data_parallel) + "```\n";
  if (const std::string p = format_pipeline(r); !p.empty()) out += "\n```\n" + p + "```\n";
  return out;
}

std::string format_csv(const BenchReport& r) {
  if (r.settings.until) {
    // One line per run (variant x seed): the medians are the table's, the spread is here.
    std::string out = "variant,status,reason,seed,reached,seconds_to_target,steps,epochs,final_metric,eval_seconds,"
                      "samples_per_sec,stopped\n";
    for (const auto& v : r.results) {
      if (!v.skipped.empty()) {
        out += v.name + ",skipped,\"" + v.skipped + "\",,,,,,,,,\n";
        continue;
      }
      // Empty cells: not reached (no time to it), no evaluation (no metric).
      for (const auto& run : v.target->runs)
        out += fmt::format("{},ok,,{},{},{},{},{:.4f},{},{:.3f},{:.3f},\"{}\"\n", v.name, run.seed,
                           run.reached ? "true" : "false", run.reached ? fmt::format("{:.3f}", run.seconds) : "",
                           run.steps, run.epochs, std::isfinite(run.metric) ? fmt::format("{:.6f}", run.metric) : "",
                           run.eval_seconds, run.samples_per_sec, run.stopped);
    }
    return out;
  }
  std::string out =
      "variant,status,reason,samples_per_sec,speedup,median_ms,p90_ms,peak_memory_bytes,memory_saving,"
      "data_wait_fraction,loss,loss_drift\n";
  for (const auto& v : r.results) {
    if (!v.skipped.empty()) {
      out += v.name + ",skipped,\"" + v.skipped + "\",,,,,,,,,\n";
      continue;
    }
    out += fmt::format("{},ok,,{:.3f},{:.4f},{:.4f},{:.4f},{},{:.4f},{:.4f},{:.6f},{}\n", v.name, v.samples_per_sec,
                       v.speedup, v.median_ms, v.p90_ms, v.peak_memory_bytes, v.memory_saving, v.data_wait_fraction,
                       v.loss, v.loss_drift ? "true" : "false");
  }
  return out;
}

nlohmann::json to_json(const BenchReport& r) {
  nlohmann::json j;
  j["device"] = nlohmann::json::object();
  for (const auto& [k, v] : r.context.report) j["device"][k] = v;
  j["workload"] = *r.workload;
  if (r.settings.until)
    j["settings"] = {{"until", r.settings.until->text()},
                     {"seeds", r.settings.seeds},
                     {"eval_every", r.settings.until->eval_every}};
  else
    j["settings"] = {{"warmup_steps", r.settings.warmup_steps},
                     {"steps", r.settings.steps},
                     {"repeats", r.settings.repeats},
                     {"stage", r.settings.stage}};
  j["memory_kind"] = r.memory_kind;
  j["variants"] = nlohmann::json::array();
  for (const auto& v : r.results) {
    const Config& c = v.config;
    // The switches a variant sets, so other tools (tools/compare_pytorch.py) can mirror it.
    nlohmann::json o = {{"name", v.name},
                        {"description", v.description},
                        {"switches",
                         {{"use_amp", c.use_amp},
                          {"amp_dtype", c.amp_dtype},
                          {"cudnn_benchmark", c.cudnn_benchmark},
                          {"tf32", c.tf32},
                          {"channels_last", c.channels_last},
                          {"num_workers", c.num_workers},
                          {"prefetch_factor", c.prefetch_factor},
                          {"pin_memory", c.pin_memory},
                          {"non_blocking", c.non_blocking},
                          {"fused_head_loss", c.fused_head_loss},
                          {"batch_size", c.batch_size}}}};
    if (!v.skipped.empty()) {
      o["status"] = "skipped";
      o["reason"] = v.skipped;
    } else {
      o["status"] = "ok";
      o["samples_per_sec"] = v.samples_per_sec;
      if (const int64_t t = tokens_per_sample(v); t > 0) o["tokens_per_sec"] = v.samples_per_sec * static_cast<double>(t);
      o["speedup"] = v.speedup;
      if (v.mfu > 0) o["mfu"] = v.mfu;
      o["median_ms"] = v.median_ms;
      o["p90_ms"] = v.p90_ms;
      o["peak_memory_bytes"] = v.peak_memory_bytes;
      o["memory_saving"] = v.memory_saving;
      o["data_wait_fraction"] = v.data_wait_fraction;
      o["loss"] = std::isfinite(v.loss) ? nlohmann::json(v.loss) : nlohmann::json(nullptr);
      o["loss_drift"] = v.loss_drift;
      o["step_ms"] = v.step_ms;
      if (v.target) {
        const TargetResult& t = *v.target;
        // Not reached (infinite time) and no evaluation (NaN metric) are nulls.
        auto finite_or_null = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
        nlohmann::json runs = nlohmann::json::array();
        for (const auto& run : t.runs)
          runs.push_back({{"seed", run.seed}, {"reached", run.reached}, {"seconds", run.seconds},
                          {"eval_seconds", run.eval_seconds}, {"steps", run.steps}, {"epochs", run.epochs},
                          {"final_metric", finite_or_null(run.metric)}, {"samples_per_sec", run.samples_per_sec},
                          {"stopped", run.stopped}});
        o["target"] = {{"reached", t.reached},
                       {"reached_count", t.reached_count},
                       {"seconds", finite_or_null(t.seconds)},
                       {"worst_seconds", finite_or_null(t.worst_seconds)},
                       {"steps", finite_or_null(t.steps)},
                       {"epochs", finite_or_null(t.epochs)},
                       {"final_metric", finite_or_null(t.metric)},
                       {"eval_seconds", t.eval_seconds},
                       {"speedup", t.speedup},
                       {"runs", runs}};
      }
      if (v.pipeline)
        o["pipeline"] = {{"stages", v.pipeline->stages},         {"micro_batches", v.pipeline->micro_batches},
                         {"schedule", v.pipeline->schedule},     {"bubble", v.pipeline->bubble},
                         {"theoretical_bubble", v.pipeline->theoretical}, {"busy", v.pipeline->busy}};
    }
    j["variants"].push_back(o);
  }
  if (!r.verdict.empty()) j["verdict"] = r.verdict;
  if (!r.explain.empty()) j["explain"] = r.explain;
  if (r.data_parallel) j["data_parallel"] = to_json(*r.data_parallel);
  return j;
}

}  // namespace gputrain
