// A weights-only unpickler for the data.pkl of torch.save files: the pickle opcodes torch.save
// writes and only the globals a state_dict needs. Nothing in the file is ever called: a global
// outside the allowlist is refused by name, and the few allowed ones are interpreted here.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace gputrain {

// One unpickled object. Containers refer to others by index into Unpickled::values (an arena),
// so that neither a deep nor a cyclic pickle can overflow the stack when it is freed.
struct PickleValue {
  // Storage: a storage a persistent id named (the 1-D tensor of all its elements), which only
  // a tensor rebuild may view.
  enum class Kind { None, Bool, Int, Float, String, List, Tuple, Dict, Global, Tensor, Storage };
  Kind kind = Kind::None;
  int64_t integer = 0;  // Bool, Int
  double number = 0;    // Float
  std::string text;     // String; Global: "module.name"; Dict: the record class it was built as, if any
  std::vector<size_t> items;  // List, Tuple: the elements; Dict: key, value, key, value, ...
  torch::Tensor tensor;       // Tensor, Storage
  uint32_t depth = 0;         // containers: 1 + their deepest element's (as far as built bottom-up)
};

struct Unpickled {
  std::vector<PickleValue> values;
  size_t root = 0;
  const PickleValue& at(size_t i) const { return values.at(i); }
};

// A storage a tensor names: (key, dtype, elements). The caller reads it from where the file
// keeps it (a zip member), checking the member's size before it allocates, and returns a 1-D
// tensor of exactly `numel` elements. Called once per key; later references share it.
using StorageReader = std::function<torch::Tensor(const std::string& key, torch::ScalarType dtype, int64_t numel)>;

// What a pickle may hold beyond dicts, lists, tuples, scalars and tensors.
struct PickleRules {
  // Objects of TorchScript classes (`__torch__.*`, as LibTorch's archives pickle modules) read as
  // records: a Dict of their attributes, the class name in `text`. Nothing of the class's code
  // runs or is even read here; the caller checks that no class defines __setstate__.
  bool torchscript_records = false;
  // Most bytes the unpickled objects may take (their bookkeeping, not the storages, which the
  // StorageReader bounds): a pickle of one-byte opcodes then stops in proportion to its file.
  uint64_t memory_budget = 256ull << 20;
};

// Unpickles `data` (`size` bytes). Throws a usage error "<where>: <why>" (exit 2) for a
// malformed pickle, an opcode torch.save does not write, a global outside the allowlist
// ("forbidden global 'os.system'"), or more objects than `rules.memory_budget` allows. Inert
// records (argparse.Namespace, as timm's train.py saves its `args`) come back as a Dict of their
// attributes, never instantiated. Tensors come back viewing shared storages, so tied weights
// stay tied. A stop signal (SIGINT, SIGTERM) ends the reading with its exit code.
Unpickled unpickle_weights(const std::string& where, const uint8_t* data, size_t size, const StorageReader& storage,
                           const std::string& hint, const PickleRules& rules = {});

// The globals unpickle_weights allows, for messages and tests.
const std::vector<std::string>& allowed_pickle_globals();

// `text` (a name from a file) as a message may show it: at most `max` characters, control and
// non-ASCII bytes as \xNN.
std::string printable(const std::string& text, size_t max = 80);

}  // namespace gputrain
