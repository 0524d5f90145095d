// The run folder: a run's files, their names and how each is written.
#include "train/run_folder.h"

#include <chrono>
#include <ctime>
#include <filesystem>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "monitor/report_html.h"

namespace fs = std::filesystem;

namespace gputrain {

std::string default_run_dir(const Config& c) {
  const std::time_t now = std::time(nullptr);
  return fmt::format("runs/{:%Y%m%d-%H%M%S}-{}", *std::localtime(&now), fs::path(c.preset).stem().string());
}

std::string resume_checkpoint(const Config& c) {
  if (c.resume != "auto") return c.resume;
  const std::string last = (fs::path(c.output_dir) / "checkpoints" / "last.pt").string();
  return fs::exists(last) ? last : "";
}

RunFolder::RunFolder(const std::string& dir, bool resuming, bool tensorboard) : dir_(dir) {
  if (!resuming && fs::exists(fs::path(dir) / "metrics.jsonl"))  // never mix or overwrite runs
    throw usage_error("output_dir '" + dir + "' already holds a run (metrics.jsonl)",
                      "pass a new --output_dir, remove that folder, or continue it with --resume auto");
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "checkpoints", ec);
  if (ec) throw usage_error("cannot create output_dir '" + dir + "' (" + ec.message() + ")");
  for (const auto& entry : fs::directory_iterator(fs::path(dir) / "checkpoints"))
    if (entry.path().extension() == ".tmp") fs::remove(entry.path());  // torn writes of a crash
  // Made before metrics.jsonl, so that a folder it cannot create (a usage error) leaves no
  // half-started run behind.
  if (tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>((fs::path(dir) / "tensorboard").string());
}

std::string RunFolder::checkpoint_path(const std::string& name) const {
  return (fs::path(dir_) / "checkpoints" / name).string();
}

void RunFolder::write_config(const nlohmann::json& record) {
  write_file_atomically((fs::path(dir_) / "config.json").string(), record.dump(2) + "\n");
}

void RunFolder::start(double monitor_interval, int gpu_index) {
  metrics_ = std::make_unique<MetricsWriter>((fs::path(dir_) / "metrics.jsonl").string());
  monitor_ = std::make_unique<Monitor>((fs::path(dir_) / "monitor.csv").string(), monitor_interval, gpu_index);
}

void RunFolder::write(const nlohmann::json& record) {
  metrics_->write(record);
  const auto& event = record["event"];
  if (tensorboard_ && (event == "step" || event == "eval")) tensorboard_->write(record);
}

double RunFolder::save_checkpoint(const std::string& name, Trainer& trainer, const CheckpointMeta& meta) {
  const auto t0 = std::chrono::steady_clock::now();
  gputrain::save_checkpoint(checkpoint_path(name), trainer, meta);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void RunFolder::prune_checkpoints(int64_t keep) {
  gputrain::prune_checkpoints((fs::path(dir_) / "checkpoints").string(), keep);
}

void RunFolder::write_report() {
  try {
    write_html_report(dir_);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gputrain: warning: report.html not written ({}); `gputrain report {}` retries\n", e.what(),
               dir_);
  }
}

}  // namespace gputrain
