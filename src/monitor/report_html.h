// report.html: a self-contained page (inline SVG, no network) with a run's curves and settings.
#pragma once
#include <string>

namespace gputrain {

// Builds <run_dir>/report.html from config.json, metrics.jsonl, monitor.csv and, when present,
// benchmark.json. Returns its path; throws a usage error when the folder holds no run.
std::string write_html_report(const std::string& run_dir);

}  // namespace gputrain
