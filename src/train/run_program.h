// The run keeps its program. A --model file (a .pt2 with its eval program <stem>.eval.pt2 when
// there is one, or a TorchScript .pt) is copied into the run folder as model.pt2 (and
// model.eval.pt2) or model.pt, and its SHA-256s go into the run's record (config.json and every
// checkpoint, under "program"). Resume, eval and infer load that copy, checked against them: a
// moved original changes nothing, and a file re-exported under the same name is never used in
// its place.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gputrain {

// The names a run folder keeps programs under (an aborted start moves them aside with it).
inline const char* const kProgramFiles[] = {"model.pt2", "model.eval.pt2", "model.pt"};

// Copies the program `model` (and its eval program) into `dir`, unless a file with its bytes is
// there; adds the names it wrote to `written`. Returns the record: {"file", "sha256", "from",
// and "eval_file", "eval_sha256" when there is an eval program}.
nlohmann::json keep_program(const std::string& model, const std::string& dir, std::vector<std::string>& written);

// Where a recorded run's program is loaded from: `dir`/file (the run folder's copy) when its
// bytes are the recorded ones; else `given` (a --model given now), when they are; else the
// original path the run copied it from, when they are. Its eval program must match as well.
// Anything else is a usage error naming the file and the hash it should have. A TorchScript
// program is refused without `trust_program` (this command line's flag, never the record's).
std::string find_program(const nlohmann::json& program, const std::string& dir, const std::string& given,
                         bool trust_program);

// The folder of the run a checkpoint belongs to: <run> for <run>/checkpoints/x.pt, else its own.
std::string run_dir_of(const std::string& checkpoint);

}  // namespace gputrain
