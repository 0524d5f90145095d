// report.html: a self-contained page (inline SVG, no network) with a run's curves and settings.
#include "monitor/report_html.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/text.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

using Points = std::vector<std::pair<double, double>>;
struct Series {
  std::string name;
  Points points;
};

std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '&')
      out += "&amp;";
    else if (ch == '"')
      out += "&quot;";
    else
      out += ch;
  }
  return out;
}

std::string num(double x) {
  return std::fabs(x) >= 1e4 || (x != 0 && std::fabs(x) < 1e-2) ? fmt::format("{:.2e}", x) : fmt::format("{:.4g}", x);
}

// A line chart: axes with min/max labels, one polyline per series, a legend.
std::string chart(const std::string& title, const std::string& x_label, const std::vector<Series>& series) {
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  std::string o = fmt::format("<figure><figcaption>{}</figcaption>", escape(title));
  if (!std::isfinite(x0)) return o + "<p class=\"none\">no data</p></figure>";
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double W = 520, H = 220, L = 60, R = 10, T = 10, B = 30;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return T + (1 - (y - y0) / (y1 - y0)) * (H - T - B); };
  // {:g}: the numbers as an ostream wrote them before (six significant digits).
  auto out = std::back_inserter(o);
  fmt::format_to(out, R"(<svg viewBox="0 0 {:g} {:g}" width="{:g}" height="{:g}">)", W, H, W, H);
  fmt::format_to(out, R"(<rect x="{:g}" y="{:g}" width="{:g}" height="{:g}" fill="none" stroke="#999"/>)", L, T,
                 W - L - R, H - T - B);
  fmt::format_to(out, R"(<text x="{:g}" y="{:g}" text-anchor="end">{}</text>)", L - 4, T + 10, num(y1));
  fmt::format_to(out, R"(<text x="{:g}" y="{:g}" text-anchor="end">{}</text>)", L - 4, H - B, num(y0));
  fmt::format_to(out, R"(<text x="{:g}" y="{:g}">{}</text>)", L, H - 8, num(x0));
  fmt::format_to(out, R"(<text x="{:g}" y="{:g}" text-anchor="end">{}</text>)", W - R, H - 8, num(x1));
  fmt::format_to(out, R"(<text x="{:g}" y="{:g}" text-anchor="middle">{}</text>)", (L + W) / 2, H - 8, escape(x_label));
  for (size_t i = 0; i < series.size(); ++i) {
    fmt::format_to(out, R"(<polyline fill="none" stroke-width="1.5" stroke="{}" points=")", colors[i % 4]);
    for (auto [x, y] : series[i].points)
      if (std::isfinite(y)) fmt::format_to(out, "{:g},{:g} ", px(x), py(y));
    o += "\"/>";
    if (series.size() > 1)
      fmt::format_to(out, R"(<text x="{:g}" y="{:g}" fill="{}">{}</text>)", L + 8, T + 16 + 14 * i, colors[i % 4],
                     escape(series[i].name));
  }
  return o + "</svg></figure>";
}

// A number field, or NaN when absent or null (metrics.jsonl writes a non-finite loss as null).
double number(const nlohmann::json& r, const char* key) {
  auto it = r.find(key);
  return it != r.end() && it->is_number() ? it->get<double>() : NAN;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
      // A line torn by a crash: skip it, keep the rest.
    }
  }
  return out;
}

// monitor.csv columns by name -> (time, value) points. With a `gpu` column (one row per GPU per
// sample), the GPU columns are named per GPU ("gpu_util@1") and the host columns are taken
// from one GPU's rows only.
std::map<std::string, Points> read_monitor(const fs::path& path) {
  std::map<std::string, Points> cols;
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> header;
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    std::stringstream ss(s);
    for (std::string cell; std::getline(ss, cell, ',');) v.push_back(cell);
    if (!s.empty() && s.back() == ',') v.push_back("");
    return v;
  };
  if (std::getline(in, line)) header = split(line);
  const auto columns = std::count(line.begin(), line.end(), ',');
  const auto gpu_col = std::find(header.begin(), header.end(), "gpu") - header.begin();
  std::string first_gpu;
  while (std::getline(in, line)) {
    if (std::count(line.begin(), line.end(), ',') != columns) continue;  // a row torn by a crash
    auto cells = split(line);
    if (cells.empty() || cells[0].empty() || cells[0] == "time_s") continue;
    const std::string gpu = static_cast<size_t>(gpu_col) < cells.size() ? cells[static_cast<size_t>(gpu_col)] : "";
    if (first_gpu.empty()) first_gpu = gpu;
    const bool host = gpu == first_gpu;
    double t = std::atof(cells[0].c_str());
    for (size_t i = 1; i < cells.size() && i < header.size(); ++i) {
      if (cells[i].empty() || static_cast<std::ptrdiff_t>(i) == gpu_col) continue;
      const bool gpu_field = header[i].rfind("gpu_", 0) == 0 || header[i] == "sm_clock_mhz" || header[i] == "throttle_reasons";
      if (gpu_field && !gpu.empty())
        cols[header[i] + "@" + gpu].push_back({t, std::atof(cells[i].c_str())});
      else if (gpu_field || host)
        cols[header[i]].push_back({t, std::atof(cells[i].c_str())});
    }
  }
  return cols;
}

// One row per epoch: its training throughput, MFU and memory peaks (older runs lack them: "-").
std::string epoch_table(const std::vector<nlohmann::json>& epochs) {
  if (epochs.empty()) return "";
  auto bytes = [](const nlohmann::json& r, const char* key) {
    return r.contains(key) ? format_bytes(r[key].get<double>()) : std::string("-");
  };
  std::ostringstream o;
  o << "<h2>Epochs</h2><table><tr><th>epoch</th><th>train samples/s</th><th>MFU</th><th>peak allocated (GPU)</th>"
       "<th>peak reserved (GPU)</th><th>peak RSS (host)</th></tr>";
  for (const auto& r : epochs)
    o << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                     num(number(r, "epoch") + 1),
                     r.contains("train_samples_per_sec") ? num(number(r, "train_samples_per_sec")) : "-",
                     r.contains("mfu") ? fmt::format("{:.2f}%", 100 * number(r, "mfu")) : "-",
                     bytes(r, "peak_allocated_bytes"), bytes(r, "peak_reserved_bytes"), bytes(r, "peak_rss_bytes"));
  o << "</table>";
  return o.str();
}

// --pipeline_stages: each stage's device, pieces and parameters (the run's "pipeline" record), how
// busy it was and the most bytes it held in a step (the step records), and the bubble against
// the theoretical one.
std::string pipeline_section(const nlohmann::json& plan, const std::vector<nlohmann::json>& steps) {
  if (plan.is_null()) return "";
  const size_t n = plan["stages"].size();
  std::vector<Series> busy(n);
  std::vector<double> busy_sum(n, 0), peak(n, 0);
  double bubble_sum = 0;
  size_t counted = 0;
  for (size_t s = 0; s < n; ++s) busy[s].name = fmt::format("stage {}", s);
  for (const auto& r : steps) {
    if (!r.contains("pipeline")) continue;
    const auto& p = r["pipeline"];
    for (size_t s = 0; s < n && s < p["busy"].size(); ++s) {
      busy[s].points.push_back({number(r, "step"), p["busy"][s].get<double>()});
      busy_sum[s] += p["busy"][s].get<double>();
      if (p.contains("stage_peak_bytes") && s < p["stage_peak_bytes"].size())
        peak[s] = std::max(peak[s], p["stage_peak_bytes"][s].get<double>());
    }
    bubble_sum += number(p, "bubble");
    ++counted;
  }
  std::ostringstream o;
  o << "<h2>Pipeline stages</h2>"
    << fmt::format("<p>{} stages x {} micro-batches, {} schedule: bubble {} measured (mean over logged steps), {}% "
                   "in theory ((N - 1) / (M + N - 1))</p>",
                   n, plan.value("micro_batches", 0), escape(plan.value("schedule", "")),
                   counted ? num(100 * bubble_sum / static_cast<double>(counted)) + "%" : std::string("not"),
                   num(100 * number(plan, "theoretical_bubble")))
    << "<table><tr><th>stage</th><th>device</th><th>pieces</th><th>parameters</th><th>mean busy</th>"
       "<th>peak bytes in a step</th></tr>";
  for (size_t s = 0; s < n; ++s) {
    const auto& st = plan["stages"][s];
    o << fmt::format("<tr><td>{}</td><td>{}</td><td>{} .. {}</td><td>{}</td><td>{}</td><td>{}</td></tr>", s,
                     escape(st.value("device", "")), escape(st.value("first", "")), escape(st.value("last", "")),
                     with_commas(static_cast<int64_t>(number(st, "parameters"))),
                     counted ? num(100 * busy_sum[s] / static_cast<double>(counted)) + "%" : std::string("-"),
                     peak[s] > 0 ? format_bytes(peak[s]) : std::string("-"));
  }
  o << "</table>" << chart("Stage busy fraction (last step of each log window)", "step", busy);
  return o.str();
}

// One line of ops.csv (monitor/profiler.cpp writes it): fields split at commas outside quotes.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (ch == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') out.back() += line[++i];
    else if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) out.emplace_back();
    else out.back() += ch;
  }
  return out;
}

// --profile's section: the step's regions, the operators with the most self time as bars, and
// the trace to open in Perfetto. Empty when the run recorded no profile.
std::string profile_section(const fs::path& dir) {
  std::ifstream in(dir / "profile" / "ops.csv");
  std::string line;
  if (!in || !std::getline(in, line) || line != "name,kind,calls,self_us,total_us,self_share,input_shapes") return "";
  struct Row {
    std::string name, kind, shapes;
    double self_us = 0, total_us = 0, share = 0;
    std::string calls;
  };
  std::vector<Row> ops;
  double step_us = 0;
  std::map<std::string, double> regions;
  while (std::getline(in, line)) {
    const auto f = csv_fields(line);
    if (f.size() != 7) continue;
    Row r{f[0], f[1], f[6]};
    try {
      r.self_us = std::stod(f[3]), r.total_us = std::stod(f[4]), r.share = std::stod(f[5]);
    } catch (const std::exception&) {
      continue;  // a damaged line is left out, not the page
    }
    r.calls = f[2];
    if (r.kind == "region") {
      if (r.name == "gputrain::step") step_us = r.total_us;
      else regions[r.name.substr(r.name.find("::") + 2)] = r.total_us;
    } else if (r.kind == "operator" && ops.size() < 12) {
      ops.push_back(r);
    }
  }
  std::ostringstream o;
  o << "<h2>Profile</h2><p>" << (fs::exists(dir / "profile" / "trace.json")
                                     ? "<a href=\"profile/trace.json\">profile/trace.json</a>: open it in "
                                       "<a href=\"https://ui.perfetto.dev\">Perfetto</a> or chrome://tracing. "
                                     : "")
    << fmt::format("The recorded steps took {} ms", num(step_us / 1000));
  if (step_us > 0 && !regions.empty()) {
    std::vector<std::string> parts;
    for (const char* name : {"data_wait", "forward", "backward", "optimizer"})
      if (regions.count(name)) parts.push_back(fmt::format("{} {}%", name, num(100 * regions[name] / step_us)));
    o << ": " << join(parts, ", ");
  }
  o << ".</p><table><tr><th>operator</th><th>self time</th><th>share of the steps</th><th>calls</th></tr>";
  double top = 0;
  for (const auto& r : ops) top = std::max(top, r.share);
  for (const auto& r : ops)
    o << fmt::format("<tr><td>{}</td><td>{} ms</td><td><svg width=\"204\" height=\"12\"><rect width=\"{:.1f}\" "
                     "height=\"12\" fill=\"#1f77b4\"/></svg> {}%</td><td>{}</td></tr>",
                     escape(r.shapes.empty() ? r.name : r.name + " " + r.shapes), num(r.self_us / 1000), top > 0 ? 200 * r.share / top : 0.0, num(100 * r.share),
                     escape(r.calls));
  o << "</table>";
  return o.str();
}

}  // namespace

std::string write_html_report(const std::string& run_dir) {
  const fs::path dir(run_dir);
  if (!fs::exists(dir / "metrics.jsonl"))
    throw usage_error("'" + run_dir + "' holds no run (no metrics.jsonl)", "pass a folder written by gputrain train");
  auto records = read_jsonl(dir / "metrics.jsonl");
  Series loss{"loss", {}}, lr{"lr", {}}, sps{"samples/s", {}}, acc{"test accuracy", {}}, test_loss{"test loss", {}};
  nlohmann::json summary;
  std::vector<nlohmann::json> epochs, events, steps;
  nlohmann::json pipeline;
  for (const auto& r : records) {
    std::string ev = r.value("event", "");
    double step = number(r, "step");
    if (ev == "step") {
      loss.points.push_back({step, number(r, "loss")});
      lr.points.push_back({step, number(r, "lr")});
      sps.points.push_back({step, number(r, "samples_per_sec")});
      steps.push_back(r);
    } else if (ev == "eval") {
      // Classification runs chart accuracy, regression runs their mean absolute error.
      if (r.contains("test_mae")) acc.name = "test mae";
      acc.points.push_back({number(r, "epoch") + 1, number(r, r.contains("test_mae") ? "test_mae" : "test_accuracy")});
      test_loss.points.push_back({number(r, "epoch") + 1, number(r, "test_loss")});
      epochs.push_back(r);
    } else if (ev == "pipeline") {
      pipeline = r;
    } else if (ev == "summary") {
      summary = r;
    } else if (ev == "amp_fallback" || ev == "oom" || ev == "resume" || ev == "stopped") {
      events.push_back(r);  // what changed the run on its way
    }
  }
  std::ostringstream o;
  o << "<!doctype html><html><head><meta charset=\"utf-8\"><title>gputrain report: " << escape(run_dir)
    << "</title><style>body{font-family:sans-serif;margin:2em;max-width:1120px}figure{display:inline-block;"
       "margin:0 1em 1em 0}figcaption{font-weight:bold}svg text{font-size:11px;fill:#333}table{border-collapse:"
       "collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}.none{color:#999}</style></head><body>"
    << "<h1>gputrain run: " << escape(run_dir) << "</h1>";
  if (!summary.is_null()) {
    std::string best = "best_test_accuracy";  // the summary names the metric the run monitored
    for (const auto& [key, value] : summary.items())
      if (key.rfind("best_test_", 0) == 0) best = key;
    o << fmt::format("<p>{} steps in {} s, {} samples/s, best test {} {}, data wait {}%</p>", summary.value("step", 0),
                     num(number(summary, "wall_seconds")), num(number(summary, "samples_per_sec")),
                     escape(best.substr(10)), num(number(summary, best.c_str())),
                     num(100 * number(summary, "data_wait_fraction")));
  }
  o << "<h2>Training</h2>" << chart("Training loss", "step", {loss})
    << chart(acc.name == "test mae" ? "Test MAE" : "Test accuracy", "epoch", {acc})
    << chart("Test loss", "epoch", {test_loss}) << chart("Learning rate", "step", {lr})
    << chart("Throughput (samples/s)", "step", {sps});
  o << epoch_table(epochs) << pipeline_section(pipeline, steps) << profile_section(dir);
  if (!events.empty()) {
    o << "<h2>Events</h2><ul>";
    for (const auto& e : events) {
      std::string fields;
      for (const auto& [key, value] : e.items())
        if (key != "event" && key != "step" && key != "monitor")
          fields += fmt::format("{}{}: {}", fields.empty() ? "" : ", ", key, value.is_string() ? value.get<std::string>() : value.dump());
      o << "<li>step " << e.value("step", 0) << ": " << escape(e.value("event", "")) << " (" << escape(fields) << ")</li>";
    }
    o << "</ul>";
  }

  auto mon = read_monitor(dir / "monitor.csv");
  o << "<h2>Telemetry</h2>";
  if (mon.empty()) {
    o << "<p class=\"none\">no monitor.csv samples</p>";
  } else {
    Points rss_mib;
    for (auto [t, v] : mon["rss_bytes"]) rss_mib.push_back({t, v / 1048576.0});
    o << chart("Host CPU (% of one core)", "seconds", {{"cpu", mon["cpu_percent"]}})
      << chart("Host RSS (MiB)", "seconds", {{"rss", rss_mib}});
    // One series per GPU ("gpu_util@0", ...), or the one of a monitor.csv without a gpu column.
    std::vector<std::string> gpus;
    for (const auto& [name, points] : mon)
      if (name.rfind("gpu_util@", 0) == 0) gpus.push_back(name.substr(9));
    auto series = [&](const std::string& column, double scale) {
      std::vector<Series> out;
      for (const std::string& g : gpus.empty() ? std::vector<std::string>{""} : gpus) {
        Points p;
        for (auto [t, v] : mon[g.empty() ? column : column + "@" + g]) p.push_back({t, v * scale});
        out.push_back({g.empty() ? "GPU" : "GPU " + g, p});
      }
      return out;
    };
    if (!gpus.empty() || mon.count("gpu_util")) {
      o << chart("GPU utilization (%)", "seconds", series("gpu_util", 1))
        << chart("GPU memory used (GiB)", "seconds", series("gpu_mem_used_bytes", 1.0 / 1073741824.0))
        << chart("GPU power (W)", "seconds", series("gpu_power_w", 1)) << chart("GPU temperature (C)", "seconds", series("gpu_temp_c", 1));
    } else {
      o << "<p class=\"none\">no GPU telemetry</p>";
    }
    // The run's summary per GPU: one row each.
    if (!summary.is_null() && summary.contains("monitor") && summary["monitor"].contains("gpus")) {
      o << "<table><tr><th>GPU</th><th>mean utilization</th><th>max utilization</th><th>peak memory</th><th>mean "
           "power</th></tr>";
      for (const auto& g : summary["monitor"]["gpus"])
        o << fmt::format("<tr><td>GPU {}</td><td>{:.1f}%</td><td>{:.1f}%</td><td>{}</td><td>{:.0f} W</td></tr>",
                         g.value("gpu", 0), number(g, "mean_gpu_util"), number(g, "max_gpu_util"),
                         format_bytes(number(g, "peak_gpu_mem_used_bytes")), number(g, "mean_gpu_power_w"));
      o << "</table>";
    }
  }

  if (fs::exists(dir / "benchmark.json")) {
    std::ifstream in(dir / "benchmark.json");
    try {
      auto bench = nlohmann::json::parse(in);
      o << "<h2>Benchmark</h2><table><tr><th>variant</th><th>samples/s</th><th>speedup</th><th>peak memory "
           "(bytes)</th><th>data wait</th><th>loss</th></tr>";
      for (const auto& v : bench["variants"]) {
        if (v.value("status", "") != "ok") {
          o << "<tr><td>" << escape(v.value("name", ""))
            << "</td><td colspan=\"5\">skipped: " << escape(v.value("reason", "")) << "</td></tr>";
          continue;
        }
        o << fmt::format("<tr><td>{}</td><td>{}</td><td>{}x</td><td>{}</td><td>{}%</td><td>{}</td></tr>",
                         escape(v.value("name", "")), num(number(v, "samples_per_sec")), num(number(v, "speedup")),
                         v.value("peak_memory_bytes", 0), num(100 * number(v, "data_wait_fraction")),
                         v["loss"].is_number() ? num(v["loss"].get<double>()) : "-");
      }
      o << "</table>";
    } catch (const nlohmann::json::exception&) {
      o << "<p class=\"none\">benchmark.json is not valid JSON</p>";
    }
  }

  o << "<h2>Configuration</h2><table><tr><th>setting</th><th>requested</th><th>resolved</th></tr>";
  std::ifstream cin(dir / "config.json");
  try {
    // {"requested", "resolved", "reasons"}; a run from before there were two is one flat object.
    auto config = nlohmann::json::parse(cin);
    const bool two = config.contains("requested") && config.contains("resolved");
    const auto& requested = two ? config["requested"] : config;
    const auto& resolved = two ? config["resolved"] : config;
    const auto reasons = two ? config.value("reasons", nlohmann::json::object()) : nlohmann::json::object();
    auto text = [](const nlohmann::json& v) { return escape(v.is_string() ? v.get<std::string>() : v.dump()); };
    for (const auto& [k, v] : requested.items()) {
      std::string used = resolved.contains(k) ? text(resolved[k]) : "";
      if (reasons.contains(k)) used += " <span class=\"none\">(" + text(reasons[k]) + ")</span>";
      o << "<tr><td>" << escape(k) << "</td><td>" << text(v) << "</td><td>" << used << "</td></tr>";
    }
  } catch (const nlohmann::json::exception&) {
    o << "<tr><td colspan=\"3\">config.json missing or not valid JSON</td></tr>";
  }
  o << "</table></body></html>\n";

  const fs::path out = dir / "report.html";
  write_file_atomically(out.string(), o.str());
  return out.string();
}

}  // namespace gputrain
