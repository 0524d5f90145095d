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
  std::string text;     // String; Global: "module.name"
  std::vector<size_t> items;  // List, Tuple: the elements; Dict: key, value, key, value, ...
  torch::Tensor tensor;       // Tensor, Storage
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

// Unpickles `data` (`size` bytes). Throws a usage error "<where>: <why>" (exit 2) for a
// malformed pickle, an opcode torch.save does not write, a global outside the allowlist
// ("forbidden global 'os.system'"), or more objects than a state_dict holds. Tensors come back
// viewing shared storages, so tied weights stay tied.
Unpickled unpickle_weights(const std::string& where, const uint8_t* data, size_t size, const StorageReader& storage,
                           const std::string& hint);

// The globals unpickle_weights allows, for messages and tests.
const std::vector<std::string>& allowed_pickle_globals();

// `text` (a name from a file) as a message may show it: at most `max` characters, control and
// non-ASCII bytes as \xNN.
std::string printable(const std::string& text, size_t max = 80);

}  // namespace gputrain
