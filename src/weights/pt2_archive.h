// torch.export.save's PT2 archive: one ExportedProgram as <root>/models/model.json (the graph,
// its signature, schema version and verifier) and its tensors stored raw in
// <root>/data/weights/ and <root>/data/constants/, described by a JSON config each.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

namespace gputrain {

struct Pt2Archive {
  std::string path;
  nlohmann::json program;  // models/model.json, its schema version checked
  // The lifted parameters and buffers (by state_dict name) and tensor constants and
  // non-persistent buffers (by the name the signature gives them), on the CPU, by name.
  std::vector<std::pair<std::string, torch::Tensor>> weights, constants;
  // Tied weights: (a name, the name in `weights` whose tensor it is), as state_dict lists a
  // parameter shared by two modules (an LM head tied to its embedding) under both names.
  std::vector<std::pair<std::string, std::string>> tied;
  // <root>/extra/gputrain.json, written by tools/export_model.py: what the graph does not say
  // ({"causal_lm": true}); an empty object when the archive has none.
  nlohmann::json gputrain = nlohmann::json::object();
};

// The export-schema major version read (torch.export's serializer, PyTorch 2.5 and later).
constexpr int kPt2SchemaMajor = 8;

// Reads the archive at `path`. A file that is not a sound PT2 archive of one program (zip,
// JSON, schema version, tensor sizes against their members) is a usage error naming it.
Pt2Archive read_pt2(const std::string& path);

// The hint for a file that is not a PT2 archive gputrain reads.
extern const char* const kPt2Hint;

}  // namespace gputrain
