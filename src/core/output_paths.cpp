// Outputs against inputs (output_paths.h).
#include "core/output_paths.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/fields.h"
#include "core/atomic_file.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

// The names a run folder keeps at its top (train/run_folder.cpp writes them; "aborted-" starts
// the folders a failed start is moved into).
const char* const kRunNames[] = {"config.json", "metrics.jsonl", "status.json", "monitor.csv", "report.html",
                                 "tensorboard", "checkpoints",   "profile",     "model.pt2",   "model.eval.pt2",
                                 "model.pt",    ".lock",         ".lock-exclusive"};

// Where a write to `path` lands, absolute, its links followed (the folders' links too).
fs::path landing(const std::string& path) {
  std::error_code ec;
  const fs::path target = fs::absolute(write_target(path.empty() ? "." : path));
  const fs::path real = fs::weakly_canonical(target, ec);
  return ec ? target.lexically_normal() : real;
}

// Whether an output is a device, a pipe or one of this process's descriptors: written through,
// and shared by any number of outputs without harm.
bool streamed(const std::string& path) { return own_descriptor(path) >= 0 || is_special_file(path); }

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  return landing(a) == landing(b);
}

}  // namespace

std::vector<PathFlag> input_files(const Config& c, bool data_only) {
  std::vector<PathFlag> in = {{"--train_file", c.train_file},
                              {"--test_file", c.test_file},
                              {"--train_targets", c.train_targets},
                              {"--test_targets", c.test_targets},
                              {"--tokenizer", c.tokenizer}};
  if (data_only) return in;
  in.push_back({"--config", c.config});
  in.push_back({"--init_from", c.init_from});
  if (c.preset.ends_with(".json")) in.push_back({"--preset", c.preset});
  if (!c.resume.empty() && c.resume != "auto") in.push_back({"--resume", c.resume});
  if (is_model_file(c.model)) in.push_back({"--model", c.model});
  return in;
}

void refuse_outputs_over_inputs(const std::vector<PathFlag>& outputs, const std::vector<PathFlag>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& out = outputs[i];
    if (out.path.empty() || streamed(out.path)) continue;
    for (const auto& in : inputs)
      if (!in.path.empty() && same_file(out.path, in.path))
        throw usage_error(fmt::format("{} {} is the file {} reads: writing it would destroy it", out.flag, out.path,
                                      in.flag),
                          fmt::format("give {} another path", out.flag));
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && same_file(out.path, outputs[j].path))
        throw usage_error(fmt::format("{} {} is also {}: one would overwrite the other", out.flag, out.path,
                                      outputs[j].flag),
                          fmt::format("give {} and {} different paths", outputs[j].flag, out.flag));
  }
}

bool is_run_record(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    std::ifstream in(path);
    const auto j = nlohmann::json::parse(in);
    return j.is_object() && j.contains("requested") && j.contains("resolved");
  } catch (const std::exception&) {
    return false;
  }
}

bool holds_run(const std::string& dir) {
  const fs::path d = dir.empty() ? "." : dir;
  std::error_code ec;
  return fs::exists(d / "metrics.jsonl", ec) || fs::is_directory(d / "checkpoints", ec) ||
         is_run_record((d / "config.json").string());
}

void refuse_output_in_run(const PathFlag& output, const std::string& run_dir) {
  if (output.path.empty() || streamed(output.path)) return;
  const fs::path inside = landing(output.path).lexically_relative(landing(run_dir));
  if (inside.empty() || *inside.begin() == "..") return;
  const std::string top = inside.begin()->string();
  const bool file = std::next(inside.begin()) == inside.end();
  const bool owned = top.starts_with("aborted-") ||
                     std::find(std::begin(kRunNames), std::end(kRunNames), top) != std::end(kRunNames);
  if (owned)
    throw usage_error(fmt::format("{} {} is {} {}{}: writing it would break the run", output.flag,
                                    output.path, file ? "the run folder's own" : "inside the run folder's", top, file ? "" : "/"),
                        fmt::format("give {} another name: the run keeps config.json, metrics.jsonl, status.json, "
                                    "checkpoints/ and its other files to itself",
                                    output.flag));
}

}  // namespace gputrain
