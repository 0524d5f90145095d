// Weights files as PyTorch writes them: recognizing a file's format from its bytes, and reading
// the state_dict of a torch.save zip without running anything in it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "core/mapped_file.h"
#include "weights/unpickler.h"

namespace gputrain {

enum class WeightsFormat {
  Safetensors,         // 8-byte header length, then a JSON header
  TorchSave,           // torch.save's zip: <name>/data.pkl and <name>/data/<key> storages
  GputrainCheckpoint,  // a gputrain checkpoint (gputrain's format tag in its pickle): format 3 is a torch.save
                       // zip, formats 1 and 2 TorchScript-style archives
  TorchScript,         // torch.jit.save: a module with code, not a state_dict
  LegacyTorchSave,     // torch.save before PyTorch 1.6 (or _use_new_zipfile_serialization=False)
  Unknown,
};

// What `m` holds, from its first bytes and (for zips) its member names; never throws for an
// unknown file (that is the caller's message to word).
WeightsFormat detect_weights_format(const std::string& path, const MappedFile& m);

struct StateDict {
  std::string wrapper;  // the key the weights sat under ("state_dict", "model"), "" at the top
  std::vector<std::pair<std::string, torch::Tensor>> tensors;  // in the file's order
  // A nanoGPT checkpoint's 'model_args' beside the weights (n_layer, n_head, n_embd, block_size,
  // vocab_size, bias): its integers and booleans; empty in any other file.
  std::map<std::string, int64_t> model_args;
};

// The object pickled in a torch.save-layout zip mapped in `m` (<name>/data.pkl, its storages in
// <name>/data/<key>), read by the weights-only unpickler under `rules`. Storages are checked
// against their members (stored, sizes, CRC, no more bytes than the file) before they are
// allocated. Storages of more than `copy_up_to` bytes come back on the meta device (shape and
// dtype, no bytes read or copied). A bad file is a usage error naming `path`, with `hint`.
Unpickled read_pickled_archive(const std::string& path, const MappedFile& m, const std::string& hint,
                               const PickleRules& rules, uint64_t copy_up_to = UINT64_MAX);

// The unpickler's memory budget for a file mapped in `m`: twice its size, plus 4 MiB for the
// smallest files (a model of tiny tensors has a pickle larger than its data).
uint64_t pickle_budget(const MappedFile& m);

// The state_dict in a torch.save zip at `path` (on the CPU): the top-level dict when it holds
// tensors, else the first of state_dict, model_state_dict, model, module, net that does (with
// `ema`: state_dict_ema, model_ema or ema, as timm and others save an EMA beside the weights).
// Storages are checked against their zip members (sizes, CRC) before they are allocated. A bad
// file is a usage error naming it, with a hint.
StateDict read_torch_save(const std::string& path, bool ema);

// The hint for a file that is not one gputrain reads.
extern const char* const kWeightsHint;

}  // namespace gputrain
