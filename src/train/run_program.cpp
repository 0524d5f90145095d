// A run's program: copied in, hashed, found again.
#include "train/run_program.h"

#include <filesystem>

#include <fmt/format.h>

#include "config/fields.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/sha256.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

// <stem>.eval.pt2 beside <stem>.pt2 (models/imported's rule): "" when there is none.
std::string eval_program_of(const std::string& model) {
  if (!model.ends_with(".pt2")) return "";
  const std::string eval = model.substr(0, model.size() - 4) + ".eval.pt2";
  return fs::exists(eval) ? eval : "";
}

bool has_bytes(const std::string& path, const std::string& sha256) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && sha256_file(path) == sha256;
}

// `from` into `to` (atomically), unless `to` already holds its bytes; returns `from`'s hash. A
// file that was not there before goes into `written` (what a failed start takes away again).
std::string copy_in(const std::string& from, const std::string& to, std::vector<std::string>& written) {
  const std::string sha = sha256_file(from);
  std::error_code ec;
  if (fs::equivalent(from, to, ec) || has_bytes(to, sha)) return sha;
  const bool existed = fs::exists(to, ec);
  copy_file_atomically(from, to);
  if (!existed) written.push_back(fs::path(to).filename().string());
  if (sha256_file(to) != sha)  // changed while it was copied (a re-export in progress)
    throw usage_error(fmt::format("--model {} changed while it was copied into the run", from),
                      "wait for the export to finish, then start the run again");
  return sha;
}

// The program found, if it may be loaded: a TorchScript file runs code when loaded, and only
// --trust_program on this command line lets one in. The record's own say (its model name, its
// trust setting) counts for nothing here: a checkpoint is a file from anywhere.
std::string trusted(const std::string& path, bool trust_program) {
  if (is_script_file(path) && !trust_program)
    throw usage_error(path + " is the run's TorchScript program: its code runs when it is loaded, so it loads only "
                             "with --trust_program",
                      "pass --trust_program if you trust the run's author and its checkpoint");
  return path;
}

}  // namespace

nlohmann::json keep_program(const std::string& model, const std::string& dir, std::vector<std::string>& written) {
  const bool pt2 = model.ends_with(".pt2");
  const std::string file = pt2 ? "model.pt2" : "model.pt";
  nlohmann::json record = {{"file", file},
                           {"sha256", copy_in(model, (fs::path(dir) / file).string(), written)},
                           {"from", fs::absolute(model).lexically_normal().string()}};
  if (const std::string eval = eval_program_of(model); !eval.empty()) {
    record["eval_file"] = "model.eval.pt2";
    record["eval_sha256"] = copy_in(eval, (fs::path(dir) / "model.eval.pt2").string(), written);
  } else if (pt2 && fs::exists(fs::path(dir) / "model.eval.pt2")) {
    // Left by another program: gputrain would pair it with this one (and never deletes a file
    // it did not write).
    throw usage_error((fs::path(dir) / "model.eval.pt2").string() + " is another program's eval program",
                      "remove it, or put " + model.substr(0, model.size() - 4) + ".eval.pt2 beside --model");
  }
  return record;
}

std::string find_program(const nlohmann::json& program, const std::string& dir, const std::string& given,
                         bool trust_program) {
  const std::string file = program.value("file", ""), sha = program.value("sha256", "");
  // The names keep_program writes, nothing else: the record is read from a file, and its copy's
  // name must not reach out of the run folder. (Its "from" path may be anywhere: a file there is
  // used only with the recorded bytes, and TorchScript only with --trust_program.)
  if (file != "model.pt2" && file != "model.pt")
    throw usage_error(fmt::format("the run's program record names the file '{}'", file),
                      "a run keeps its program as model.pt2 or model.pt; this record was not written by gputrain");
  const std::string eval_sha = program.value("eval_sha256", "");
  // A candidate is the run's program when its bytes, and its eval program's, are the recorded ones.
  auto matches = [&](const std::string& path) {
    if (path.empty() || !has_bytes(path, sha)) return false;
    const std::string eval = eval_program_of(path);
    return eval_sha.empty() ? eval.empty() : !eval.empty() && sha256_file(eval) == eval_sha;
  };
  const std::string copy = (fs::path(dir) / file).string();
  const std::string wanted = fmt::format("sha256 {}{}", sha, eval_sha.empty() ? "" : ", its eval program " + eval_sha);
  // A --model given now names the program to use: the run's, or it is refused, never passed over.
  if (!given.empty() && !matches(given))
    throw usage_error(fmt::format("--model {} is not the run's program ({})", given, wanted),
                      "give the file the run was trained with (or no --model: the run keeps a copy), or start a new "
                      "run with --init_from the checkpoint");
  if (matches(copy)) return trusted(copy, trust_program);
  if (!given.empty()) return trusted(given, trust_program);
  const std::string from = program.value("from", "");
  if (matches(from)) return trusted(from, trust_program);
  if (has_bytes(copy, sha)) {  // the program is intact: its eval program is what changed
    const std::string eval = (fs::path(dir) / "model.eval.pt2").string();
    if (eval_sha.empty())
      throw usage_error(eval + ": the run had no eval program, and this one would change its evaluation",
                        "remove it");
    throw usage_error(fmt::format("{}: the run's eval program is missing or changed (sha256 {})", eval, eval_sha),
                      "restore it, or pass --model FILE of the program with its <stem>.eval.pt2 beside it");
  }
  if (fs::exists(copy))
    throw usage_error(fmt::format("{} is not the run's program: its bytes changed ({})", copy, wanted),
                      "restore the run's own copy, or pass --model FILE of that program");
  throw usage_error(fmt::format("the run's program is gone: no {}{} with its bytes ({})", copy,
                                from.empty() ? "" : " and no " + from, wanted),
                    "pass --model FILE of that program");
}

std::string run_dir_of(const std::string& checkpoint) {
  const fs::path folder = fs::path(checkpoint).parent_path();
  return (folder.filename() == "checkpoints" ? folder.parent_path() : folder).string();
}

}  // namespace gputrain
